/** A failure the API reports to its caller: HTTP status, snake_case code, human message, optional extras. */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export interface FieldProblem {
  field: string;
  message: string;
}

export const errors = {
  validation: (details: FieldProblem[], message = 'The request is not valid') =>
    new AppError(400, 'validation_failed', message, { details }),
  badRequest: (code: string, message: string) => new AppError(400, code, message),
  unauthorized: (message = 'Authentication required') => new AppError(401, 'unauthorized', message),
  invalidCredentials: () => new AppError(401, 'invalid_credentials', 'Wrong username or password'),
  forbidden: (message = 'This token may not use this endpoint') => new AppError(403, 'forbidden', message),
  accountDisabled: () => new AppError(403, 'account_disabled', 'This account is disabled'),
  accountExpired: () => new AppError(403, 'account_expired', 'This account has expired'),
  notFound: (what: string) => new AppError(404, 'not_found', `${what} not found`),
  noHost: (message: string) => new AppError(404, 'no_host', message),
  conflict: (code: string, message: string, extra: Record<string, unknown> = {}) =>
    new AppError(409, code, message, extra),
  rateLimited: (retryAfterSeconds: number) =>
    new AppError(
      429,
      'rate_limited',
      'Too many failed attempts; try again later',
      { retry_after: retryAfterSeconds },
      { 'retry-after': String(retryAfterSeconds) },
    ),
  busy: (retryAfterSeconds: number) =>
    new AppError(
      429,
      'rate_limited',
      'Too many password checks are waiting; try again shortly',
      { retry_after: retryAfterSeconds },
      { 'retry-after': String(retryAfterSeconds) },
    ),
  unavailable: (code: string, message: string) => new AppError(503, code, message),
};
