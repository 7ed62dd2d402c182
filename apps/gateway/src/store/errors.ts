import { constraintViolation } from './dialect.js';

/**
 * A write a constraint refused: a duplicate key (`unique`), or a reference to a row that is not there or a delete of
 * one still referenced (`foreign_key`). Repositories throw it, so callers need not know either driver's codes.
 */
export class ConstraintViolation extends Error {
  constructor(
    readonly violated: 'unique' | 'foreign_key',
    cause: unknown,
  ) {
    super(`${violated} constraint violated`, { cause });
    this.name = 'ConstraintViolation';
  }
}

/** Awaits a write whose constraints a caller may meet, turning the driver's error into a ConstraintViolation. */
export async function constrained<T>(write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    const violated = constraintViolation(error);
    throw violated ? new ConstraintViolation(violated, error) : error;
  }
}

/** Whether a repository refused a write for this constraint. */
export const violates = (error: unknown, constraint: ConstraintViolation['violated']): boolean =>
  error instanceof ConstraintViolation && error.violated === constraint;
