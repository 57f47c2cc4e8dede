'use strict';
// The hot path's two statements with the most planning in them, as PL/pgSQL functions: PL/pgSQL keeps
// the plan of each statement in the session (a generic plan after a few calls), where the same SQL
// sent as text is parsed and planned on every request. Measured with pg_stat_statements
// (track_planning) on the benchmark's database: planning was 0.65 ms of an idempotent create's
// 1.04 ms of statement time (the claim 0.36, the auth read 0.20) and 0.16 of a replay's 0.19 ms.
// A function is a schema object, not session state: it is safe behind a pooler in transaction mode,
// where named prepared statements (the other way to reuse a plan) are not.
//
// idem_auth_read: the auth lookup of every authenticated request (the token's user row: status and
// role), and with a scope key the key's record in the same row (routers/auth/who.ts).
//
// idem_claim: the claim of idempotency/caps.ts, whose comments explain each part: the key's advisory
// lock (duplicates claim one at a time), a free in-flight slot (FOR UPDATE SKIP LOCKED), room under
// the retained cap (the slot counters' sum, the exact count only near the cap), the record's INSERT
// ... ON CONFLICT DO NOTHING, and the slot's counter (and holder, for a leased Mode B record). When it
// inserted the record it marks the transaction (idem.claimed = the scope key, transaction-local), so
// that a Mode A business write sent in the same round trip runs only if the claim was ours.
//
// idem_claim is created here only while its fourteen-argument form (20261125000003, trailing
// arguments defaulted) does not exist: this ten-argument form beside it would make every ten-argument
// call ambiguous, so running this again on a later database must leave it alone.
const up = `
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

DO $mig$
BEGIN
  IF to_regprocedure('idem_claim(text, text, text, text, float8, integer, integer, text, text, float8,
                      text, integer, text, text)') IS NOT NULL THEN
    RETURN;
  END IF;
  EXECUTE $sql$
CREATE OR REPLACE FUNCTION idem_claim(
  p_scope_key text, p_request_hash text, p_user_scope text, p_operation text, p_ttl_seconds float8,
  p_max_in_flight integer, p_max_retained integer, p_field_hashes text,
  p_lease_owner text, p_lease_seconds float8)
RETURNS TABLE (claimed integer, free integer, slots integer, room boolean, bumped integer)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_claimed integer;
  v_free integer;
  v_slots integer;
  v_room boolean;
  v_bumped integer;
BEGIN
  PERFORM pg_advisory_xact_lock(7648, hashtext(p_scope_key));
  WITH free_slot AS (
    SELECT s.slot FROM idempotency_slots s
    WHERE s.user_scope = p_user_scope AND s.slot <= p_max_in_flight
      AND (s.holder IS NULL OR EXISTS (
        SELECT 1 FROM idempotency_records h WHERE h.scope_key = s.holder AND h.status <> 'PROCESSING'))
    ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED),
  totals AS (
    SELECT COALESCE(sum(t.retained), 0)::int AS n, (count(*) FILTER (WHERE t.slot <= p_max_in_flight))::int AS slots
    FROM idempotency_slots t WHERE t.user_scope = p_user_scope),
  has_room AS (
    SELECT CASE WHEN totals.n < p_max_retained THEN true
                ELSE (SELECT count(*) FROM (SELECT 1 FROM idempotency_records x
                       WHERE x.user_scope = p_user_scope AND x.expires_at > now() LIMIT p_max_retained) c)
                     < p_max_retained END AS ok
    FROM totals),
  ins AS (
    INSERT INTO idempotency_records (scope_key, request_hash, status, user_scope, operation, expires_at, slot,
                                     field_hashes, owner_token, lease_until)
    SELECT p_scope_key, p_request_hash, 'PROCESSING', p_user_scope, p_operation,
           now() + make_interval(secs => p_ttl_seconds), free_slot.slot, p_field_hashes, p_lease_owner,
           CASE WHEN p_lease_owner IS NULL THEN NULL ELSE now() + make_interval(secs => p_lease_seconds) END
    FROM free_slot, has_room WHERE has_room.ok
    ON CONFLICT (scope_key) DO NOTHING
    RETURNING slot),
  bump AS (
    UPDATE idempotency_slots s
    SET retained = s.retained + 1, holder = CASE WHEN p_lease_owner IS NULL THEN s.holder ELSE p_scope_key END
    FROM ins WHERE s.user_scope = p_user_scope AND s.slot = ins.slot
    RETURNING 1)
  SELECT (SELECT ins.slot FROM ins)::integer, (SELECT free_slot.slot FROM free_slot)::integer,
         (SELECT totals.slots FROM totals), (SELECT has_room.ok FROM has_room), (SELECT count(*) FROM bump)::integer
  INTO v_claimed, v_free, v_slots, v_room, v_bumped;
  IF v_claimed IS NOT NULL THEN
    -- Claimed: a business statement sent in the same round trip runs only under this mark
    -- (transaction-local, as SET LOCAL: gone at COMMIT or ROLLBACK; idempotency/caps.ts claimedGuard).
    PERFORM set_config('idem.claimed', p_scope_key, true);
  END IF;
  RETURN QUERY SELECT v_claimed, v_free, v_slots, v_room, v_bumped;
END
$fn$
$sql$;
END
$mig$;
`;
module.exports = {
  // 20261125000003's down() sends this with its own drops, as one statement.
  sql: up,
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) =>
    queryInterface.sequelize.query(`
      DROP FUNCTION IF EXISTS idem_claim(text, text, text, text, float8, integer, integer, text, text, float8);
      DROP FUNCTION IF EXISTS idem_auth_read(text, text, text);
    `),
};
