import { isDatabaseUnavailable } from '../core/db-errors.js';

/**
 * What the process does with a promise rejection nobody handled.
 *
 * pg-boss 10.4.2 calls `complete()` and `fail()` without awaiting them once a job's handler has
 * returned (node_modules/pg-boss/src/manager.js, `work()` → `onFetch`). When the database goes away
 * at that moment, their rejection has no handler and Node ends the process: an instance died that way
 * in test/payments/payment-database-restart.test.ts (about 1 run in 3, since the webhook dispatcher's
 * frequent jobs made the window common), so that a database restart took the service down with it.
 *
 * A rejection that says the database is unavailable is survived (logged): the job's completion is
 * lost, so pg-boss runs the job again after its expiry, and every job of ours is fenced by its own
 * records (safe to run twice). Any other unhandled rejection is a bug: the process exits 1, as Node
 * would.
 */
export function unhandledRejectionPolicy(reason: unknown): 'survive' | 'exit' {
  return isDatabaseUnavailable(reason) ? 'survive' : 'exit';
}
