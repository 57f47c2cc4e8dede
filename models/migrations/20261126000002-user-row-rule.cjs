'use strict';
// The user row's rule in one SQL definition, idem_user_admits, called by both writes that check it
// in their own statement (user_insert_checked, the keyless create; idem_execute, the keyed create in
// one statement), which each wrote it out before (issue 26, "One rule, one place"). Its TypeScript
// twin, for the requests that read the row first, is routers/auth/who.ts admittedAs;
// test/rules/user-row-rule.test.ts runs both over every case and compares them.
//
// The rule: the row of the token's user in the token's tenant (found by its primary key alone and the
// tenant compared after, so the kept generic plan never reads it through a (tenant_id, ...) index);
// without one, the token's role stands. A DISABLED row refuses; with p_admin_only, so does a role
// (the row's, else the token's) other than admin. One row always: the row's status and role (null:
// no row in the tenant) for the 403 the caller builds, and whether the request is admitted.
//
// CREATE OR REPLACE throughout, signatures unchanged: safe to run twice, and no moment without any of
// them. down() puts back the bodies of 20261125000001 and 20261125000003, then drops the rule.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION idem_user_admits(
  p_user_id bigint, p_tenant_id text, p_token_role text, p_admin_only boolean)
RETURNS TABLE (status text, role text, admitted boolean)
LANGUAGE sql STABLE AS $fn$
  SELECT r.status, r.role,
         r.status IS DISTINCT FROM 'DISABLED' AND NOT (p_admin_only AND coalesce(r.role, p_token_role) <> 'admin')
  FROM (SELECT CASE WHEN u.tenant_id = p_tenant_id THEN u.status::text END AS status,
               CASE WHEN u.tenant_id = p_tenant_id THEN u.role::text END AS role
        FROM (SELECT 1) one LEFT JOIN users u ON u.id = p_user_id) r
$fn$;

CREATE OR REPLACE FUNCTION user_insert_checked(
  p_tenant_id text, p_name text, p_age smallint, p_username text, p_email text,
  p_password_hash text, p_password_salt text, p_role text, p_status text,
  p_user_id bigint, p_token_role text, p_admin_only boolean)
RETURNS TABLE (id bigint, name varchar, age smallint, username varchar, email varchar, role varchar,
               status varchar, "createdAt" timestamptz, "updatedAt" timestamptz)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
  IF NOT (SELECT a.admitted FROM idem_user_admits(p_user_id, p_tenant_id, p_token_role, p_admin_only) a) THEN
    RETURN;
  END IF;
  RETURN QUERY
  INSERT INTO users (tenant_id, name, age, username, email, password_hash, password_salt, role, status)
  VALUES (p_tenant_id, p_name, p_age, p_username, p_email, p_password_hash, p_password_salt, p_role, p_status)
  RETURNING users.id, users.name, users.age, users.username, users.email, users.role, users.status,
            users.created_at, users.updated_at;
END
$fn$;

CREATE OR REPLACE FUNCTION idem_execute(
  p_user_id text, p_tenant_id text, p_token_role text, p_admin_only boolean,
  p_scope_key text, p_request_hash text, p_user_scope text, p_operation text, p_ttl_seconds float8,
  p_max_in_flight integer, p_max_retained integer, p_field_hashes text, p_lock_timeout_ms integer,
  p_status text, p_http_status integer, p_response_body text, p_resource_id text, p_business text)
RETURNS TABLE ("userStatus" text, "userRole" text, refused boolean,
               "requestHash" text, status text, "resourceId" text, "responseBody" text, "httpStatus" integer,
               "ownerToken" text, "fieldHashes" text, "leaseExpired" boolean, expired boolean,
               "leaseLeftMs" float8, claimed integer, free integer, slots integer, room boolean)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_status text;
  v_role text;
  v_admitted boolean;
  r idempotency_records%ROWTYPE;
  c record;
  v_written bigint;
BEGIN
  SELECT a.status, a.role, a.admitted INTO v_status, v_role, v_admitted
    FROM idem_user_admits(p_user_id::bigint, p_tenant_id, p_token_role, p_admin_only) a;
  IF NOT v_admitted THEN
    RETURN QUERY SELECT v_status, v_role, true, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer,
      NULL::text, NULL::text, NULL::boolean, NULL::boolean, NULL::float8, NULL::integer, NULL::integer,
      NULL::integer, NULL::boolean;
    RETURN;
  END IF;

  SELECT * INTO r FROM idempotency_records x WHERE x.scope_key = p_scope_key;
  IF FOUND THEN
    RETURN QUERY SELECT v_status, v_role, false, r.request_hash::text, r.status::text, r.resource_id::text,
      r.response_body, r.http_status::integer, r.owner_token::text, r.field_hashes,
      (r.lease_until IS NOT NULL AND r.lease_until < now()), (r.expires_at < now()),
      CASE WHEN r.lease_until IS NULL THEN NULL
           ELSE GREATEST(0, EXTRACT(EPOCH FROM r.lease_until - now()) * 1000)::float8 END,
      NULL::integer, NULL::integer, NULL::integer, NULL::boolean;
    RETURN;
  END IF;

  PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
  SELECT * INTO c FROM idem_claim(p_scope_key, p_request_hash, p_user_scope, p_operation, p_ttl_seconds,
    p_max_in_flight, p_max_retained, p_field_hashes, NULL, NULL,
    p_status, p_http_status, p_response_body, p_resource_id);
  IF c.claimed IS NOT NULL THEN
    EXECUTE p_business;
    GET DIAGNOSTICS v_written = ROW_COUNT;
    IF v_written <> 1 THEN
      RAISE EXCEPTION 'idem_execute: the business statement wrote % rows', v_written;
    END IF;
  END IF;
  RETURN QUERY SELECT v_status, v_role, false, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer,
    NULL::text, NULL::text, NULL::boolean, NULL::boolean, NULL::float8, c.claimed, c.free, c.slots, c.room;
END
$fn$;
`),
  down: async (queryInterface) => {
    await require('./20261125000001-user-insert-function.cjs').up(queryInterface);
    await queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION idem_execute(
  p_user_id text, p_tenant_id text, p_token_role text, p_admin_only boolean,
  p_scope_key text, p_request_hash text, p_user_scope text, p_operation text, p_ttl_seconds float8,
  p_max_in_flight integer, p_max_retained integer, p_field_hashes text, p_lock_timeout_ms integer,
  p_status text, p_http_status integer, p_response_body text, p_resource_id text, p_business text)
RETURNS TABLE ("userStatus" text, "userRole" text, refused boolean,
               "requestHash" text, status text, "resourceId" text, "responseBody" text, "httpStatus" integer,
               "ownerToken" text, "fieldHashes" text, "leaseExpired" boolean, expired boolean,
               "leaseLeftMs" float8, claimed integer, free integer, slots integer, room boolean)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_status text;
  v_role text;
  v_as text;
  r idempotency_records%ROWTYPE;
  c record;
  v_written bigint;
BEGIN
  SELECT CASE WHEN u.tenant_id = p_tenant_id THEN u.status::text END,
         CASE WHEN u.tenant_id = p_tenant_id THEN u.role::text END
    INTO v_status, v_role FROM users u WHERE u.id = p_user_id::bigint;
  v_as := CASE WHEN v_status = 'DISABLED' THEN 'DISABLED' ELSE coalesce(v_role, p_token_role) END;
  IF v_as = 'DISABLED' OR (p_admin_only AND v_as <> 'admin') THEN
    RETURN QUERY SELECT v_status, v_role, true, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer,
      NULL::text, NULL::text, NULL::boolean, NULL::boolean, NULL::float8, NULL::integer, NULL::integer,
      NULL::integer, NULL::boolean;
    RETURN;
  END IF;

  SELECT * INTO r FROM idempotency_records x WHERE x.scope_key = p_scope_key;
  IF FOUND THEN
    RETURN QUERY SELECT v_status, v_role, false, r.request_hash::text, r.status::text, r.resource_id::text,
      r.response_body, r.http_status::integer, r.owner_token::text, r.field_hashes,
      (r.lease_until IS NOT NULL AND r.lease_until < now()), (r.expires_at < now()),
      CASE WHEN r.lease_until IS NULL THEN NULL
           ELSE GREATEST(0, EXTRACT(EPOCH FROM r.lease_until - now()) * 1000)::float8 END,
      NULL::integer, NULL::integer, NULL::integer, NULL::boolean;
    RETURN;
  END IF;

  PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
  SELECT * INTO c FROM idem_claim(p_scope_key, p_request_hash, p_user_scope, p_operation, p_ttl_seconds,
    p_max_in_flight, p_max_retained, p_field_hashes, NULL, NULL,
    p_status, p_http_status, p_response_body, p_resource_id);
  IF c.claimed IS NOT NULL THEN
    EXECUTE p_business;
    GET DIAGNOSTICS v_written = ROW_COUNT;
    IF v_written <> 1 THEN
      RAISE EXCEPTION 'idem_execute: the business statement wrote % rows', v_written;
    END IF;
  END IF;
  RETURN QUERY SELECT v_status, v_role, false, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer,
    NULL::text, NULL::text, NULL::boolean, NULL::boolean, NULL::float8, c.claimed, c.free, c.slots, c.room;
END
$fn$;
DROP FUNCTION IF EXISTS idem_user_admits(bigint, text, text, boolean);
`);
  },
};
