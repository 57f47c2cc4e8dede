'use strict';
// Tx 2's UPDATE of the payment (PROCESSING → SUCCEEDED or FAILED) becomes a HOT update: a new version
// on the same page and no new index entries, instead of one entry in each of payments' three unique
// indexes (each checked for uniqueness against the old version first).
//
// An update is HOT only when it changes no column an index uses, the predicates of partial indexes
// included, and the new version fits on the row's page. payments_status_idx (status) WHERE status =
// 'PROCESSING' put `status` in a predicate, so no payment's finalise was HOT: in the bench
// (2026-11-27, `--only=payments`) 5,980 updates of payments, 0 HOT. Nothing reads by it: the
// recoverer finds abandoned attempts by the records' lease index, the resumable reading by
// payments_resumable_idx, reconcile lists by merchant and time.
//
// fillfactor leaves room on each page for the new version of rows updated soon after their insert:
// payments and refunds (finalised once, then `amountRefunded` on each refund of the payment), and
// orders (PAID when its payment succeeds; 14% of those updates were not HOT, for want of room). It
// applies to pages filled from now on.
//
// Safe to run twice; down() puts the index and the default fillfactor back.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
      DROP INDEX IF EXISTS payments_status_idx;
      ALTER TABLE payments SET (fillfactor = 85);
      ALTER TABLE refunds SET (fillfactor = 85);
      ALTER TABLE orders SET (fillfactor = 90);
    `),
  down: (queryInterface) =>
    queryInterface.sequelize.query(`
      ALTER TABLE orders RESET (fillfactor);
      ALTER TABLE refunds RESET (fillfactor);
      ALTER TABLE payments RESET (fillfactor);
      CREATE INDEX IF NOT EXISTS payments_status_idx ON payments (status) WHERE status = 'PROCESSING';
    `),
};
