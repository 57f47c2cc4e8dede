'use strict';
// Columns and limits of spec section 2.4, plus what the engine needs (http_status, user_scope,
// operation). Correctness rests on the primary key; the indexes serve caps, purge and recovery.
const up = `
CREATE TABLE IF NOT EXISTS idempotency_records (
  scope_key VARCHAR(200) PRIMARY KEY,
  request_hash VARCHAR(64) NOT NULL,
  status VARCHAR(20) NOT NULL CHECK (status IN ('PROCESSING', 'SUCCEEDED', 'FAILED_RETRYABLE', 'FAILED_FINAL')),
  resource_id VARCHAR(100),
  response_body TEXT,
  http_status SMALLINT,
  owner_token VARCHAR(64),
  lease_until TIMESTAMPTZ,
  user_scope VARCHAR(60) NOT NULL,
  operation VARCHAR(40) NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_records_user_expires_idx ON idempotency_records (user_scope, expires_at);
CREATE INDEX IF NOT EXISTS idempotency_records_user_processing_idx ON idempotency_records (user_scope) WHERE status = 'PROCESSING';
CREATE INDEX IF NOT EXISTS idempotency_records_purge_idx ON idempotency_records (expires_at) WHERE status <> 'PROCESSING';
CREATE INDEX IF NOT EXISTS idempotency_records_lease_idx ON idempotency_records (lease_until) WHERE status = 'PROCESSING';
`;
module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query('DROP TABLE IF EXISTS idempotency_records'),
};
