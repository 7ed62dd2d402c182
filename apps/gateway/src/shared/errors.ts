/**
 * What sort of failure it is, for whoever reports it: the HTTP error handler turns each kind into a status, a task
 * keeps only the code and message.
 */
export type ErrorKind =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'unprocessable'
  | 'rate_limited'
  | 'internal'
  | 'unavailable'
  | 'insufficient_storage';

/**
 * A failure the domain reports: its kind, a stable snake_case code, a human message and optional extras (fields the
 * API adds to its error body, such as `details` or `retry_after`).
 */
export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export interface FieldProblem {
  field: string;
  message: string;
}

export const errors = {
  validation: (details: FieldProblem[], message = 'The request is not valid') =>
    new DomainError('invalid', 'validation_failed', message, { details }),
  badRequest: (code: string, message: string) => new DomainError('invalid', code, message),
  unauthorized: (message = 'Authentication required') =>
    new DomainError('unauthenticated', 'unauthorized', message),
  invalidCredentials: () =>
    new DomainError('unauthenticated', 'invalid_credentials', 'Wrong username or password'),
  forbidden: (message = 'This token may not use this endpoint') =>
    new DomainError('forbidden', 'forbidden', message),
  accountDisabled: () => new DomainError('forbidden', 'account_disabled', 'This account is disabled'),
  accountExpired: () => new DomainError('forbidden', 'account_expired', 'This account has expired'),
  notFound: (what: string) => new DomainError('not_found', 'not_found', `${what} not found`),
  noHost: (message: string) => new DomainError('not_found', 'no_host', message),
  conflict: (code: string, message: string, extra: Record<string, unknown> = {}) =>
    new DomainError('conflict', code, message, extra),
  rateLimited: (retryAfterSeconds: number) =>
    new DomainError(
      'rate_limited',
      'rate_limited',
      `Too many failed attempts; try again in ${retryAfterSeconds} second${retryAfterSeconds === 1 ? '' : 's'}`,
      { retry_after: retryAfterSeconds },
    ),
  busy: (retryAfterSeconds: number) =>
    new DomainError(
      'rate_limited',
      'rate_limited',
      'Too many password checks are waiting; try again shortly',
      {
        retry_after: retryAfterSeconds,
      },
    ),
  unavailable: (code: string, message: string) => new DomainError('unavailable', code, message),
};
