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
BEGIN
  -- idem_auth_read's row (20261124000001-hot-path-functions), and the allocation when it found no
  -- record (a record's request_hash is NOT NULL).
  RETURN QUERY
  SELECT a.*,
         CASE WHEN a."requestHash" IS NULL THEN nextval(p_sequence::regclass)::text END,
         date_trunc('milliseconds', now())
  FROM idem_auth_read(p_user_id, p_tenant_id, p_scope_key) a;
END
$fn$;
`),
  down: (queryInterface) =>
    queryInterface.sequelize.query(
      'DROP FUNCTION IF EXISTS idem_auth_read_allocating(text, text, text, text);',
    ),
};
