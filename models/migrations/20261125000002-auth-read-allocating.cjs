'use strict';
// The auth read of a keyed create (routers/auth/who.ts readUser with an id sequence): idem_auth_read's
// user row and key record, and, when the key has no record yet, the new row's id (nextval of the
// table's own sequence) and the database's time to the millisecond. The create's answer is then
// known before its write, so the record's final state rides in the claim's round trip with the
// INSERT and the COMMIT: a keyed create takes 2 round trips instead of 3 (idempotency/engine.ts).
// A replay finds its record and allocates nothing; an allocated id the write does not use (a lost
// race, a 400) is a gap in the sequence, as a rolled-back INSERT leaves one.
//
// A separate function rather than a new argument of idem_auth_read: nextval makes it VOLATILE (the
// other stays STABLE), and instances still running the previous version keep calling theirs.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION idem_auth_read_allocating(
  p_user_id text, p_tenant_id text, p_scope_key text, p_sequence text)
RETURNS TABLE ("userStatus" text, "userRole" text, "requestHash" text, status text, "resourceId" text,
               "responseBody" text, "httpStatus" integer, "ownerToken" text, "fieldHashes" text,
               "leaseExpired" boolean, expired boolean, "leaseLeftMs" float8,
               "newId" text, "newAt" timestamptz)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
BEGIN
  -- As idem_auth_read (20261124000001-hot-path-functions): the user row by its primary key alone.
  RETURN QUERY
  SELECT CASE WHEN u.tenant_id = p_tenant_id THEN u.status::text END,
         CASE WHEN u.tenant_id = p_tenant_id THEN u.role::text END,
         r.request_hash::text, r.status::text, r.resource_id::text,
         r.response_body, r.http_status::integer, r.owner_token::text, r.field_hashes,
         (r.lease_until IS NOT NULL AND r.lease_until < now()), (r.expires_at < now()),
         CASE WHEN r.lease_until IS NULL THEN NULL
              ELSE GREATEST(0, EXTRACT(EPOCH FROM r.lease_until - now()) * 1000)::float8 END,
         CASE WHEN r.scope_key IS NULL THEN nextval(p_sequence::regclass)::text END,
         date_trunc('milliseconds', now())
  FROM (SELECT 1) AS one
  LEFT JOIN users u ON u.id = p_user_id::bigint
  LEFT JOIN idempotency_records r ON r.scope_key = p_scope_key;
END
$fn$;
`),
  down: (queryInterface) =>
    queryInterface.sequelize.query(
      'DROP FUNCTION IF EXISTS idem_auth_read_allocating(text, text, text, text);',
    ),
};
