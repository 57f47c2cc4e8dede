'use strict';
// The claim and the effects' Tx 2 keep index plans, whatever the statistics were when a connection
// planned them.
//
// These functions keep one generic plan per connection (20261128000201: plan_cache_mode =
// force_generic_plan), made on the statistics of the moment. On tables ANALYZEd while empty (a new
// deployment's first minute: relpages 0, reltuples 0), PostgreSQL's generic plan for every statement
// in them is a sequential scan: of every user's slot rows for the free slot, of idempotency_records
// for a holder, of payments and orders for Tx 2's updates. A connection that planned them then kept
// those scans until the next ANALYZE of each table, while the tables grew.
// test/idempotency/claim-slot-plan.test.ts counts them.
//
// Every lookup in them is by a key given whole (the record's and the slot's primary keys, the
// user's slot rows, the user's records by (user_scope, expires_at), the payment, order and refund by
// id). So a sequential scan is never the plan they need, and `enable_seqscan = off` on the function
// keeps the planner to the indexes at any table size, for the time of each call. The purge's batch
// does the same for its statement (idempotency/caps.ts DELETE_RECORDS_PLAN).
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
      FUNCTIONS.map((f) => `ALTER FUNCTION ${f} SET enable_seqscan = off;`).join('\n'),
    ),
  down: (queryInterface) =>
    queryInterface.sequelize.query(
      FUNCTIONS.map((f) => `ALTER FUNCTION ${f} RESET enable_seqscan;`).join('\n'),
    ),
};
