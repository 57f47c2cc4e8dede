'use strict';
// (merchant_id, merchant_order_no) unique across all payments, whatever the number of instances:
// the index decides, never a read before the insert.
const up = `
CREATE TABLE IF NOT EXISTS payments (
  id VARCHAR(100) PRIMARY KEY,
  payment_no VARCHAR(64) NOT NULL UNIQUE,
  merchant_id VARCHAR(36) NOT NULL,
  merchant_order_no VARCHAR(64) NOT NULL,
  order_id BIGINT NOT NULL REFERENCES orders (id),
  user_id BIGINT NOT NULL,
  amount NUMERIC(14, 2) NOT NULL CHECK (amount > 0),
  currency CHAR(3) NOT NULL,
  description VARCHAR(200),
  status VARCHAR(12) NOT NULL DEFAULT 'PROCESSING' CHECK (status IN ('PROCESSING', 'SUCCEEDED', 'FAILED')),
  failure_reason VARCHAR(40),
  charge_id VARCHAR(100),
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS payments_merchant_order_key ON payments (merchant_id, merchant_order_no);
CREATE INDEX IF NOT EXISTS payments_status_idx ON payments (status) WHERE status = 'PROCESSING';
`;
module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query('DROP TABLE IF EXISTS payments'),
};
