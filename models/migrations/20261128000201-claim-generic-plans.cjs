'use strict';
// The claim and the effects' Tx 2 keep one plan per session (plan_cache_mode = force_generic_plan on
// the function), instead of being planned again on many calls.
//
// PL/pgSQL plans each statement with its values for the first five calls of a session, then compares
// the cost the planner gives a generic plan (parameters unknown) with the average of those: when the
// generic one looks dearer, every later call is planned again with its values. idem_claim's statement
// of CTEs (the free slot, the totals, the retained cap, the insert, the slot's counter) is the one it
// happened to: pg_stat_statements with track_planning, machine PostgreSQL 15, `--only=refunds`
// (2026-11-27): 19,824 plans for 37,367 calls of it, 0.43 ms each, 0.23 ms of planning per claim on
// average against 0.18 ms of executing it; the slot's release in idem_finish_payment, 9,923 plans for
// 19,628 calls (0.05 ms each). Which sessions do so depends on the statistics there are when they
// start. PostgreSQL 18 (the bench's embedded server) kept the generic plan by itself in the same
// scenario (22,195 claims, the statement not among those planned again), so the setting changes
// nothing there.
//
// A generic plan of these statements is the plan they need for any values: every lookup is by a key
// given whole (the key's advisory lock, its tombstone, the user's slot rows by their primary key, the
// user's records by (user_scope, expires_at), the record, the slot and the resource by their keys).
// The setting applies to the statements of these functions only, for the time of each call.
//
// ALTER FUNCTION … SET: safe to run twice; down() resets it.
const FUNCTIONS = [
  'idem_claim(text, text, text, text, float8, integer, integer, text, text, float8, text, integer, text, text)',
  'idem_finish_payment(text, text, text, integer, text, text, text, text, timestamptz, text, bigint, boolean)',
  'idem_finish_refund(text, text, text, integer, text, text, text, text, timestamptz, text, boolean)',
];

module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(
      FUNCTIONS.map((f) => `ALTER FUNCTION ${f} SET plan_cache_mode = force_generic_plan;`).join('\n'),
    ),
  down: (queryInterface) =>
    queryInterface.sequelize.query(
      FUNCTIONS.map((f) => `ALTER FUNCTION ${f} RESET plan_cache_mode;`).join('\n'),
    ),
};
