'use strict';
// Exports (CONTRACT section 11): long-running work with a task id, run in the background under a
// lease and checkpointed part by part, so that a worker killed at any moment is continued by another
// instance from its last committed part (docs/DECISIONS.md: the storage and the snapshot rule).
//
// exports: the task. `lease_owner`/`lease_until` are the worker's lease (taken with a conditional
// UPDATE naming the previous owner, as idempotency/lease.ts does); `last_id`, `parts_written`,
// `rows_written`, `bytes_written` the checkpoint, advanced only together with the part they describe,
// in one statement fenced on the owner token. `snapshot_at`: the rows an export holds are those with
// created_at <= it (the export's creation time); `all_users`: an admin's export (the tenant's rows),
// else the creator's own rows.
//
// export_parts: the file, a chunk per row, in part_no order (part 1 starts with the CSV header).
// Plain rows, not large objects: a part and its checkpoint commit in one statement under the same
// fence, and a DELETE removes them (large objects need lo_unlink and leave orphans otherwise).
//
// The trigger writes export.succeeded / export.failed in the transaction that finishes the export,
// exactly as payments_event does (models/migrations/20261127000001-events-outbox.cjs); the lease
// owner token is left out of the stored row.
const up = `
CREATE TABLE IF NOT EXISTS exports (
  id BIGSERIAL PRIMARY KEY,
  tenant_id VARCHAR(36) NOT NULL,
  user_id BIGINT NOT NULL,
  all_users BOOLEAN NOT NULL,
  resource VARCHAR(16) NOT NULL CHECK (resource IN ('orders', 'payments')),
  format VARCHAR(8) NOT NULL CHECK (format IN ('csv', 'ndjson')),
  created_from TIMESTAMPTZ,
  created_to TIMESTAMPTZ,
  snapshot_at TIMESTAMPTZ NOT NULL,
  status VARCHAR(12) NOT NULL DEFAULT 'PROCESSING' CHECK (status IN ('PROCESSING', 'SUCCEEDED', 'FAILED')),
  row_count BIGINT,
  bytes BIGINT,
  failure_reason VARCHAR(40),
  lease_owner VARCHAR(64),
  lease_until TIMESTAMPTZ,
  last_id TEXT,
  parts_written INTEGER NOT NULL DEFAULT 0,
  rows_written BIGINT NOT NULL DEFAULT 0,
  bytes_written BIGINT NOT NULL DEFAULT 0,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  completed_at TIMESTAMPTZ,
  expires_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS exports_processing ON exports (lease_until) WHERE status = 'PROCESSING';
CREATE INDEX IF NOT EXISTS exports_expires ON exports (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS export_parts (
  export_id BIGINT NOT NULL REFERENCES exports (id) ON DELETE CASCADE,
  part_no INTEGER NOT NULL,
  data TEXT NOT NULL,
  rows INTEGER NOT NULL,
  last_id TEXT,
  PRIMARY KEY (export_id, part_no)
);

CREATE OR REPLACE FUNCTION exports_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.status IN ('SUCCEEDED', 'FAILED') AND OLD.status IS DISTINCT FROM NEW.status THEN
    PERFORM event_emit(NEW.tenant_id, NEW.user_id, 'export.' || lower(NEW.status), NEW.id::text,
                       to_jsonb(NEW) - 'lease_owner');
  END IF;
  RETURN NULL;
END
$fn$;
DROP TRIGGER IF EXISTS exports_event ON exports;
CREATE TRIGGER exports_event AFTER UPDATE OF status ON exports
  FOR EACH ROW EXECUTE FUNCTION exports_event();
`;

const down = `
DROP TRIGGER IF EXISTS exports_event ON exports;
DROP FUNCTION IF EXISTS exports_event();
DROP TABLE IF EXISTS export_parts;
DROP TABLE IF EXISTS exports;
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
