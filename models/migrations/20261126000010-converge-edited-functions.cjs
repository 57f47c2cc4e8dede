'use strict';
// Two migrations were edited after they had been applied somewhere, so a database migrated between
// the versions kept the old function bodies (SequelizeMeta records the name, not the text):
// - 20261125000002-auth-read-allocating (commit 3125634): idem_auth_read_allocating's body became a
//   call of idem_auth_read instead of its own copy of that query. Re-applied here as it is now.
// - 20261124000001-hot-path-functions (commit a8e54b7): idem_claim gained the transaction's mark
//   (idem.claimed). Nothing to do for it here: 20261125000003 drops that ten-argument form and creates
//   the fourteen-argument one with the mark on every database, and re-creating the ten-argument form
//   beside it would make every call ambiguous.
// Migration files are never edited now: test/ops/migration-checksums.test.ts compares each with
// models/migrations/checksums.json.
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
  // The body stays: it is the one 20261125000002 defines now, and the code calls the function.
  down: async () => {},
};
