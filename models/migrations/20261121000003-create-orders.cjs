'use strict';
// user_id is not a foreign key: operator tokens may act for users that have no row (CONTRACT 4).
const up = `
CREATE TABLE IF NOT EXISTS orders (
  id BIGSERIAL PRIMARY KEY,
  tenant_id VARCHAR(36) NOT NULL,
  user_id BIGINT NOT NULL,
  merchant_order_no VARCHAR(64) NOT NULL,
  amount NUMERIC(14, 2) NOT NULL CHECK (amount > 0),
  currency CHAR(3) NOT NULL,
  description VARCHAR(200),
  status VARCHAR(10) NOT NULL DEFAULT 'CREATED' CHECK (status IN ('CREATED', 'PAID')),
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS orders_tenant_merchant_order_no_key ON orders (tenant_id, merchant_order_no);
CREATE INDEX IF NOT EXISTS orders_tenant_user_idx ON orders (tenant_id, user_id, id);
`;
module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query('DROP TABLE IF EXISTS orders'),
};
