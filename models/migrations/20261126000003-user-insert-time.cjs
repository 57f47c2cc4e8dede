'use strict';
// The keyless user create takes its time from the service's clock (p_at), as the keyed creates do
// (models/id-blocks.ts), instead of the table's default now(): one source of createdAt whatever the
// path (issue 26, defect 3; models/timestamps.ts states the bound). A new overload: the twelve-argument
// form stays for an instance still running the previous version. Safe to run twice.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION user_insert_checked(
  p_tenant_id text, p_name text, p_age smallint, p_username text, p_email text,
  p_password_hash text, p_password_salt text, p_role text, p_status text,
  p_user_id bigint, p_token_role text, p_admin_only boolean, p_at timestamptz)
RETURNS TABLE (id bigint, name varchar, age smallint, username varchar, email varchar, role varchar,
               status varchar, "createdAt" timestamptz, "updatedAt" timestamptz)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
  IF NOT (SELECT a.admitted FROM idem_user_admits(p_user_id, p_tenant_id, p_token_role, p_admin_only) a) THEN
    RETURN;
  END IF;
  RETURN QUERY
  INSERT INTO users (tenant_id, name, age, username, email, password_hash, password_salt, role, status,
                     created_at, updated_at)
  VALUES (p_tenant_id, p_name, p_age, p_username, p_email, p_password_hash, p_password_salt, p_role, p_status,
          p_at, p_at)
  RETURNING users.id, users.name, users.age, users.username, users.email, users.role, users.status,
            users.created_at, users.updated_at;
END
$fn$;
`),
  down: (queryInterface) =>
    queryInterface.sequelize.query(
      'DROP FUNCTION IF EXISTS user_insert_checked(text, text, smallint, text, text, text, text, text, text, bigint, text, boolean, timestamptz);',
    ),
};
