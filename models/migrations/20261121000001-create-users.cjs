'use strict';
// Raw SQL in one string: PostgreSQL runs a multi-statement simple query as one transaction.
const up = `
CREATE TABLE IF NOT EXISTS users (
  id BIGSERIAL PRIMARY KEY,
  tenant_id VARCHAR(36) NOT NULL,
  name VARCHAR(100) NOT NULL,
  age SMALLINT NOT NULL CHECK (age BETWEEN 0 AND 150),
  username VARCHAR(50),
  email VARCHAR(254),
  password_hash VARCHAR(128),
  password_salt VARCHAR(64),
  role VARCHAR(10) NOT NULL DEFAULT 'user' CHECK (role IN ('admin', 'user')),
  status VARCHAR(10) NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'DISABLED')),
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS users_tenant_username_key ON users (tenant_id, username);
CREATE UNIQUE INDEX IF NOT EXISTS users_tenant_email_key ON users (tenant_id, lower(email));
CREATE INDEX IF NOT EXISTS users_tenant_id_idx ON users (tenant_id, id);
`;
module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query('DROP TABLE IF EXISTS users'),
};
