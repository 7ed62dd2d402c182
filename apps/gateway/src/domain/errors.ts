import { DomainError } from '../shared/errors.js';
import { isConnectionError, isStorageFull } from '../store/dialect.js';

/** The failures every part reports with (shared/errors.ts), which the domain's callers take from here. */
export { DomainError, type ErrorKind, errors, type FieldProblem } from '../shared/errors.js';

/**
 * What a database failure means to a caller, or null for any other error: a full disk or an unreachable database is
 * no fault of the request, so it is named instead of answered as internal.
 */
export function storeFailure(error: unknown): DomainError | null {
  if (isStorageFull(error))
    return new DomainError(
      'insufficient_storage',
      'storage_full',
      "The gateway's storage is full; free space in its data directory or database and try again",
    );
  if (isConnectionError(error))
    return new DomainError('unavailable', 'database_unavailable', 'The database is unavailable');
  return null;
}
