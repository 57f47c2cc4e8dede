import { UniqueConstraintError } from 'sequelize';
import { Conflict, ConflictCode } from './errors.js';

/**
 * Write-then-handle-conflict: the unique index decides, never a read before the insert (two
 * concurrent requests could both read "nothing there"). Maps the index name to a 409.
 */
export function rethrowUnique(err: unknown, fields: Record<string, string>): never {
  if (err instanceof UniqueConstraintError) {
    const constraint = String((err.parent as { constraint?: string } | undefined)?.constraint ?? '');
    for (const [index, field] of Object.entries(fields)) {
      if (constraint === index) throw new Conflict(ConflictCode.UniqueTaken, `${field}: already taken`);
    }
  }
  throw err;
}
