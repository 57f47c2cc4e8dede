'use strict';
// A keyless user create (models/user.ts User.insertChecked) as a PL/pgSQL function, so that its plan
// is kept per session (the reason is that of 20261124000001-hot-path-functions). Sent as text, the
// INSERT ... SELECT ... WHERE carrying the user row's rule was planned on every call, and planning
// was most of its cost: pgbench, one client, the same statement: 0.39–0.43 ms per statement as
// text, 0.32–0.35 ms as this function, 0.30–0.34 ms for the INSERT without the rule (docs/BENCHMARKS.md).
//
// The rule is that of routers/auth/who.ts admittedAs, checked by the write itself: the row of the
// token's user in its tenant (none: the token's role stands); a DISABLED user writes nothing; with
// p_admin_only, neither does a user whose role is not admin. No row returned: refused, and the caller
// reads the row for the 403 it means. The row is found by its primary key alone and its tenant
// compared after (the kept, generic plan would otherwise read it through a (tenant_id, ...) index,
// as idem_auth_read says). A duplicate username or email raises the unique violation (23505) that
// names its constraint, as the INSERT did.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION user_insert_checked(
  p_tenant_id text, p_name text, p_age smallint, p_username text, p_email text,
  p_password_hash text, p_password_salt text, p_role text, p_status text,
  p_user_id bigint, p_token_role text, p_admin_only boolean)
RETURNS TABLE (id bigint, name varchar, age smallint, username varchar, email varchar, role varchar,
               status varchar, "createdAt" timestamptz, "updatedAt" timestamptz)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_as text;
BEGIN
  SELECT CASE WHEN u.tenant_id <> p_tenant_id THEN NULL
              WHEN u.status = 'DISABLED' THEN 'DISABLED' ELSE u.role::text END
    INTO v_as FROM users u WHERE u.id = p_user_id;
  v_as := coalesce(v_as, p_token_role);
  IF v_as = 'DISABLED' OR (p_admin_only AND v_as <> 'admin') THEN
    RETURN;
  END IF;
  RETURN QUERY
  INSERT INTO users (tenant_id, name, age, username, email, password_hash, password_salt, role, status)
  VALUES (p_tenant_id, p_name, p_age, p_username, p_email, p_password_hash, p_password_salt, p_role, p_status)
  RETURNING users.id, users.name, users.age, users.username, users.email, users.role, users.status,
            users.created_at, users.updated_at;
END
$fn$;
`),
  down: (queryInterface) =>
    queryInterface.sequelize.query(
      'DROP FUNCTION IF EXISTS user_insert_checked(text, text, smallint, text, text, text, text, text, text, bigint, text, boolean);',
    ),
};
