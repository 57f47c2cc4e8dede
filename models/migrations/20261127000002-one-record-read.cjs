'use strict';
// The record's columns, read through one function (issue 26, "One rule, one place": they were
// written out in READ_RECORD_SQL, idem_auth_read and idem_execute). idem_record_view(scope_key) is
// the one definition: what a reader of a key's record sees (its request hash, status, sealed answer,
// owner token, field hashes, and the lease and expiry judged by the database's clock).
//
// It is LANGUAGE sql, STABLE and not STRICT, so PostgreSQL inlines it into the query that calls it
// (inline_set_returning_function): the plans of idem_auth_read and idem_execute are the ones they
// had (test/idempotency/record-view.test.ts checks both the inlining and that no other function
// selects these columns itself).
//
// CREATE OR REPLACE throughout with unchanged signatures: safe to run twice, never a moment without
// any of them. down() puts back 20261124000001's idem_auth_read and 20261126000002's idem_execute,
// then drops the view function.
const view = `
CREATE OR REPLACE FUNCTION idem_record_view(p_scope_key text)
RETURNS TABLE ("requestHash" text, status text, "resourceId" text, "responseBody" text, "httpStatus" integer,
               "ownerToken" text, "fieldHashes" text, "leaseExpired" boolean, expired boolean, "leaseLeftMs" float8)
LANGUAGE sql STABLE AS $fn$
  SELECT r.request_hash::text, r.status::text, r.resource_id::text, r.response_body, r.http_status::integer,
         r.owner_token::text, r.field_hashes,
         (r.lease_until IS NOT NULL AND r.lease_until < now()), (r.expires_at < now()),
         CASE WHEN r.lease_until IS NULL THEN NULL
              ELSE GREATEST(0, EXTRACT(EPOCH FROM r.lease_until - now()) * 1000)::float8 END
    FROM idempotency_records r WHERE r.scope_key = p_scope_key
$fn$;
`;

const authRead = `
CREATE OR REPLACE FUNCTION idem_auth_read(p_user_id text, p_tenant_id text, p_scope_key text)
RETURNS TABLE ("userStatus" text, "userRole" text, "requestHash" text, status text, "resourceId" text,
               "responseBody" text, "httpStatus" integer, "ownerToken" text, "fieldHashes" text,
               "leaseExpired" boolean, expired boolean, "leaseLeftMs" float8)
LANGUAGE plpgsql STABLE AS $fn$
#variable_conflict use_column
BEGIN
  -- The user row by its primary key alone, its tenant compared afterwards: with the tenant in the join
  -- condition, the cached (generic) plan read the row through (tenant_id, ...) indexes, scanning every
  -- user of the tenant.
  RETURN QUERY
  SELECT CASE WHEN u.tenant_id = p_tenant_id THEN u.status::text END,
         CASE WHEN u.tenant_id = p_tenant_id THEN u.role::text END,
         r.*
  FROM (SELECT 1) AS one
  LEFT JOIN users u ON u.id = p_user_id::bigint
  LEFT JOIN LATERAL idem_record_view(p_scope_key) r ON true;
END
$fn$;
`;

const execute = `
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

  RETURN QUERY SELECT v_status, v_role, false, r.*, NULL::integer, NULL::integer, NULL::integer, NULL::boolean
    FROM idem_record_view(p_scope_key) r;
  IF FOUND THEN
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
`;

// The bodies before this migration (20261124000001's idem_auth_read, 20261126000002's idem_execute).
const before = `
CREATE OR REPLACE FUNCTION idem_auth_read(p_user_id text, p_tenant_id text, p_scope_key text)
RETURNS TABLE ("userStatus" text, "userRole" text, "requestHash" text, status text, "resourceId" text,
               "responseBody" text, "httpStatus" integer, "ownerToken" text, "fieldHashes" text,
               "leaseExpired" boolean, expired boolean, "leaseLeftMs" float8)
LANGUAGE plpgsql STABLE AS $fn$
#variable_conflict use_column
BEGIN
  -- The user row by its primary key alone, its tenant compared afterwards: with the tenant in the join
  -- condition, the cached (generic) plan read the row through (tenant_id, ...) indexes, scanning every
  -- user of the tenant.
  RETURN QUERY
  SELECT CASE WHEN u.tenant_id = p_tenant_id THEN u.status::text END,
         CASE WHEN u.tenant_id = p_tenant_id THEN u.role::text END,
         r.request_hash::text, r.status::text, r.resource_id::text,
         r.response_body, r.http_status::integer, r.owner_token::text, r.field_hashes,
         (r.lease_until IS NOT NULL AND r.lease_until < now()), (r.expires_at < now()),
         CASE WHEN r.lease_until IS NULL THEN NULL
              ELSE GREATEST(0, EXTRACT(EPOCH FROM r.lease_until - now()) * 1000)::float8 END
  FROM (SELECT 1) AS one
  LEFT JOIN users u ON u.id = p_user_id::bigint
  LEFT JOIN idempotency_records r ON r.scope_key = p_scope_key;
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
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(view + authRead + execute),
  down: (queryInterface) =>
    queryInterface.sequelize.query(`${before}\nDROP FUNCTION IF EXISTS idem_record_view(text);`),
};
