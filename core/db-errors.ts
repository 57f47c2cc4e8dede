import { UniqueConstraintError } from 'sequelize';
import { Conflict, DomainError } from './errors.js';

type Chain = { name?: unknown; code?: unknown; cause?: unknown; parent?: unknown; message?: unknown };

/** The error and what it wraps (Sequelize keeps the driver's error as `parent`), bounded. */
function* chainOf(err: unknown): Generator<Chain> {
  let current = err as Chain | undefined;
  for (let i = 0; i < 8 && current; i++) {
    yield current;
    current = (current.cause ?? current.parent) as Chain | undefined;
  }
}

const UNAVAILABLE_ERROR_NAMES = new Set([
  'SequelizeConnectionError',
  'SequelizeConnectionRefusedError',
  'SequelizeConnectionTimedOutError',
  'SequelizeConnectionAcquireTimeoutError',
  'SequelizeHostNotReachableError',
  'SequelizeHostNotFoundError',
]);
// Connection exceptions (08*), server shutting down or starting (57P01-57P03), too many connections,
// our transaction ended by idle_in_transaction_session_timeout (25P03) or cancelled by
// statement_timeout (57014), a read-only server (25006: a replica after a failover).
const UNAVAILABLE_PG_CODE = /^(08...|57P0[123]|53300|25P03|57014|25006)$/;
// EPIPE: a write on a Unix socket the server has closed (over TCP the same drop reads ECONNRESET).
// These are the driver's and Node's own messages, which are never translated; the server's own
// (localised by lc_messages) are decided by their SQLSTATE above, "terminating connection" (57P01-3)
// only being matched here too for a driver that surfaced it without its code.
const DROPPED =
  /Connection terminated|connection is closed|not queryable|ECONNRESET|EPIPE|terminating connection/i;

/** The database could not be reached or dropped the connection: nothing was committed, a retry is safe. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (const e of chainOf(err)) {
    if (typeof e.name === 'string' && UNAVAILABLE_ERROR_NAMES.has(e.name)) return true;
    if (typeof e.code === 'string' && (UNAVAILABLE_PG_CODE.test(e.code) || e.code === 'ECONNREFUSED'))
      return true;
    // A server reached through its Unix socket is down: the socket file is gone.
    if (e.code === 'ENOENT' && typeof e.message === 'string' && e.message.includes('.s.PGSQL.')) return true;
    if (typeof e.message === 'string' && DROPPED.test(e.message)) return true;
  }
  return false;
}

const PG_LOCK_NOT_AVAILABLE = '55P03';
const PG_DEADLOCK = '40P01';
const PG_SERIALIZATION = '40001';

/** Our own `lock_timeout` expired: the row we waited for is held by another transaction. */
export function isLockNotAvailable(err: unknown): boolean {
  for (const e of chainOf(err)) if (e.code === PG_LOCK_NOT_AVAILABLE) return true;
  return false;
}

/**
 * The write hit our own lock_timeout (it waited on a row another transaction holds, e.g. a concurrent
 * create of the same merchantOrderNo under another key) or a deadlock: the database could not serve
 * the request now, and everything was rolled back (found by test/idempotency/in-flight.test.ts).
 */
export function isDatabaseBusy(err: unknown): boolean {
  for (const e of chainOf(err))
    if (e.code === PG_LOCK_NOT_AVAILABLE || e.code === PG_DEADLOCK || e.code === PG_SERIALIZATION)
      return true;
  return false;
}

/**
 * The set of errors answered 503 (CONTRACT section 6): a domain refusal of kind `unavailable` (a
 * `throw` failpoint stands for one), or, for any error that is not a domain error, the database
 * unavailable or busy past the wait bound. routers/error-answer.ts words each answer; code below
 * routers/ that must know the answer before it is given (idempotency/effect-run.ts turns it into a
 * 202 under a lease) asks this. test/unit/db-errors.test.ts holds the two to one set.
 */
export function answersUnavailable(err: unknown): boolean {
  if (err instanceof DomainError) return err.kind === 'unavailable';
  return isDatabaseUnavailable(err) || isDatabaseBusy(err);
}

/**
 * Write-then-handle-conflict: the unique index decides, never a read before the insert (two
 * concurrent requests could both read "nothing there"). Maps the index name to unique_taken.
 */
export function rethrowUnique(err: unknown, fields: Record<string, string>): never {
  const constraint = uniqueViolation(err);
  if (constraint !== undefined && Object.hasOwn(fields, constraint))
    throw new Conflict('unique_taken', `${fields[constraint]}: already taken`);
  throw err;
}

/** rethrowUnique as a value: the Conflict a listed constraint means, or the error itself. */
export function uniqueAsConflict(err: unknown, fields: Record<string, string>): unknown {
  try {
    rethrowUnique(err, fields);
  } catch (mapped) {
    return mapped;
  }
}

const PG_UNIQUE_VIOLATION = '23505';

/**
 * The unique constraint a write violated ('' when the error does not name it), or undefined for any
 * other error: Sequelize's UniqueConstraintError, or the driver's own error (core/sql.ts statements).
 */
export function uniqueViolation(err: unknown): string | undefined {
  if (err instanceof UniqueConstraintError) {
    return String((err.parent as { constraint?: string } | undefined)?.constraint ?? '');
  }
  const e = err as { code?: unknown; constraint?: unknown } | null;
  if (e?.code === PG_UNIQUE_VIOLATION) return typeof e.constraint === 'string' ? e.constraint : '';
  return undefined;
}
