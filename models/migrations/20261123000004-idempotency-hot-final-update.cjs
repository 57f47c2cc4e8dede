'use strict';
// The final UPDATE of a Mode A record (status, response, resource id) can be a HOT update only if it
// changes no column an index uses, predicates of partial indexes included. `status` was in three
// predicates, so only about 9% of those updates were HOT (docs/BENCHMARKS.md). Now:
// - the per-user PROCESSING index is gone: the caps are counted on idempotency_slots (O(1));
// - the purge index covers every row by expiry (the purge still filters out PROCESSING rows);
// - the lease index covers rows with a lease (Mode B only: Mode A never sets lease_until);
// - fillfactor 80 leaves room on each page for the record's new version.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
      DROP INDEX IF EXISTS idempotency_records_user_processing_idx;
      DROP INDEX IF EXISTS idempotency_records_purge_idx;
      CREATE INDEX idempotency_records_purge_idx ON idempotency_records (expires_at);
      DROP INDEX IF EXISTS idempotency_records_lease_idx;
      CREATE INDEX idempotency_records_lease_idx ON idempotency_records (lease_until) WHERE lease_until IS NOT NULL;
      ALTER TABLE idempotency_records SET (fillfactor = 80);
    `),
  down: (queryInterface) =>
    queryInterface.sequelize.query(`
      ALTER TABLE idempotency_records RESET (fillfactor);
      DROP INDEX IF EXISTS idempotency_records_lease_idx;
      CREATE INDEX idempotency_records_lease_idx ON idempotency_records (lease_until) WHERE status = 'PROCESSING';
      DROP INDEX IF EXISTS idempotency_records_purge_idx;
      CREATE INDEX idempotency_records_purge_idx ON idempotency_records (expires_at) WHERE status <> 'PROCESSING';
      CREATE INDEX IF NOT EXISTS idempotency_records_user_processing_idx ON idempotency_records (user_scope) WHERE status = 'PROCESSING';
    `),
};
