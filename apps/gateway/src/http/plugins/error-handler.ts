import type { FastifyError, FastifyInstance } from 'fastify';
import { DomainError, type ErrorKind, storeFailure } from '../../domain/errors.js';

interface AjvIssue {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

function fieldOf(issue: AjvIssue): string {
  const base = (issue.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
  const missing = issue.params?.missingProperty;
  if (typeof missing === 'string') return base ? `${base}.${missing}` : missing;
  return base || '(body)';
}

function messageOf(issue: AjvIssue): string {
  if (issue.keyword === 'required') return 'is required';
  if (issue.keyword === 'format' && issue.params?.format === 'date-time')
    return 'must be an RFC 3339 timestamp';
  if (issue.keyword === 'pattern') return 'has characters or a form that is not allowed';
  if (issue.keyword === 'anyOf' || issue.keyword === 'const') return 'is not one of the allowed values';
  return issue.message ?? 'is not valid';
}

/** The one place a domain error's kind becomes an HTTP status. */
const STATUS: Record<Exclude<ErrorKind, 'internal'>, number> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  unprocessable: 422,
  rate_limited: 429,
  unavailable: 503,
  insufficient_storage: 507,
};

/**
 * One detail per issue, except that a union (anyOf) reports each branch's failure and then its own for the same
 * field: that field gets one detail, naming the formats it may have when the branches differ only by format
 * (`ip_address`: "must match format "ipv4" or "ipv6"").
 */
function detailsOf(issues: AjvIssue[]): { field: string; message: string }[] {
  const unions = new Set(issues.filter((issue) => issue.keyword === 'anyOf').map(fieldOf));
  const details: { field: string; message: string }[] = [];
  for (const issue of issues) {
    const field = fieldOf(issue);
    if (!unions.has(field)) {
      details.push({ field, message: messageOf(issue) });
      continue;
    }
    if (details.some((detail) => detail.field === field)) continue;
    const branches = issues.filter((other) => fieldOf(other) === field && other.keyword !== 'anyOf');
    const formats = branches.map((branch) => (branch.keyword === 'format' ? branch.params?.format : null));
    const message =
      formats.length > 0 && formats.every((format) => typeof format === 'string')
        ? `must match format ${formats.map((format) => `"${format}"`).join(' or ')}`
        : 'is not one of the allowed values';
    details.push({ field, message });
  }
  return details;
}

/** Every error leaves as `{error, code, details?}`; internals (stacks, SQL, paths) never do. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | DomainError, request, reply) => {
    const internal = () => {
      request.log.error({ err: error }, 'request failed');
      return reply.status(500).send({ error: 'Internal server error', code: 'internal' });
    };
    const send = (failure: DomainError) => {
      // An internal failure's code and message are for the log (and a task's record), never for the caller.
      if (failure.kind === 'internal') return internal();
      const retryAfter = failure.extra.retry_after;
      if (failure.kind === 'rate_limited' && typeof retryAfter === 'number')
        reply.header('retry-after', String(retryAfter));
      return reply
        .status(STATUS[failure.kind])
        .send({ error: failure.message, code: failure.code, ...failure.extra });
    };
    if (error instanceof DomainError) return send(error);
    if (error.validation) {
      if (error.validationContext === 'params') {
        return reply.status(404).send({ error: 'Resource not found', code: 'not_found' });
      }
      const details = detailsOf(error.validation as AjvIssue[]);
      const first = details[0];
      const where = error.validationContext === 'querystring' ? 'query parameter' : 'field';
      return reply.status(400).send({
        error: first ? `Invalid ${where} ${first.field}: ${first.message}` : 'The request is not valid',
        code: 'validation_failed',
        details,
      });
    }
    const status = error.statusCode ?? 500;
    if (status === 413) {
      return reply
        .status(413)
        .send({ error: 'The request body is larger than 1 MiB', code: 'payload_too_large' });
    }
    if (status === 415) {
      return reply
        .status(415)
        .send({ error: 'Send the body as application/json', code: 'unsupported_media_type' });
    }
    if (status === 400 && error.code?.startsWith('FST_ERR_CTP')) {
      return reply.status(400).send({ error: 'The request body is not valid JSON', code: 'invalid_json' });
    }
    if (status >= 400 && status < 500) {
      return reply.status(status).send({ error: 'The request could not be handled', code: 'bad_request' });
    }
    const failure = storeFailure(error);
    if (failure) {
      request.log.error({ err: error }, failure.code);
      return send(failure);
    }
    return internal();
  });

  app.setNotFoundHandler((request, reply) => {
    reply
      .status(404)
      .send({ error: `No route for ${request.method} ${request.url.split('?')[0]}`, code: 'not_found' });
  });
}
