import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../domain/errors.js';

function compiler(options: Options): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    removeAdditional: true,
    useDefaults: true,
    strict: false,
    ...options,
  });
  addFormats.default(ajv);
  return ajv;
}

/** Query strings and path parameters arrive as text and are coerced to their types; JSON bodies are not, so
 * `{"username": 12345}` is refused instead of quietly becoming "12345". */
export function registerValidation(app: FastifyInstance): void {
  const body = compiler({ coerceTypes: false });
  const text = compiler({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? body : text).compile(schema));

  // Fastify parses text/plain by default, which let such a body reach validation (400 "must be object"): only
  // JSON is taken, so every other media type is 415 unsupported_media_type alike.
  app.removeContentTypeParser('text/plain');
  // An empty body under a JSON content type (common for action POSTs) means "no body", not a parse error.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, raw, done) => {
    const source = String(raw);
    if (source.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(source));
    } catch {
      done(errors.badRequest('invalid_json', 'The request body is not valid JSON'), undefined);
    }
  });
}
