'use strict';
// The claim's wait on a duplicate's advisory lock, told from every other error by a marker it sets,
// not by PostgreSQL's message text: the engine read the error's context ("PL/pgSQL function
// idem_execute(...) line N at EXECUTE", or "idem_claim" in it) to tell a failed business statement
// from the claim's own lock time-out, and with lc_messages in another language (German: "PL/pgSQL-
// Funktion ... Zeile N bei EXECUTE") a taken username on a keyed create answered 500 on every retry
// and a business write's lock time-out 202 (issue 26, defect 1).
//
// Now the claim's waits that the lock bound ends (lock_timeout, or a deadlock, on the key's advisory
// lock or on a duplicate's uncommitted record) are re-raised with their own SQLSTATE and HINT
// 'idem_claim: key busy' (idempotency/at-once.ts CLAIM_BUSY_HINT): a duplicate is in flight (202).
// Any other database error of the claim's round trip is the business statement's (claimLocal sends
// the business statement as a statement of its own, so a marker around it would need a block there
// too). The block is a subtransaction; the advisory lock and the record taken in it stay with the
// transaction when it ends.
//
// Same signature as 20261125000003's idem_claim, so OR REPLACE, up and down: safe to run twice, and
// never a moment without idem_claim. down() restores that body.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION idem_claim(
  p_scope_key text, p_request_hash text, p_user_scope text, p_operation text, p_ttl_seconds float8,
  p_max_in_flight integer, p_max_retained integer, p_field_hashes text,
  p_lease_owner text, p_lease_seconds float8,
  p_status text DEFAULT 'PROCESSING', p_http_status integer DEFAULT NULL,
  p_response_body text DEFAULT NULL, p_resource_id text DEFAULT NULL)
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
                                       field_hashes, owner_token, lease_until, http_status, response_body, resource_id)
      SELECT p_scope_key, p_request_hash, p_status, p_user_scope, p_operation,
             now() + make_interval(secs => p_ttl_seconds), free_slot.slot, p_field_hashes, p_lease_owner,
             CASE WHEN p_lease_owner IS NULL THEN NULL ELSE now() + make_interval(secs => p_lease_seconds) END,
             p_http_status, p_response_body, p_resource_id
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
  EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
    RAISE EXCEPTION USING ERRCODE = SQLSTATE, MESSAGE = SQLERRM, HINT = 'idem_claim: key busy';
  END;
  IF v_claimed IS NOT NULL THEN
    -- Claimed: a business statement sent in the same round trip runs only under this mark
    -- (transaction-local, as SET LOCAL: gone at COMMIT or ROLLBACK; idempotency/caps.ts claimedGuard).
    PERFORM set_config('idem.claimed', p_scope_key, true);
  END IF;
  RETURN QUERY SELECT v_claimed, v_free, v_slots, v_room, v_bumped;
END
$fn$;
`),
  down: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION idem_claim(
  p_scope_key text, p_request_hash text, p_user_scope text, p_operation text, p_ttl_seconds float8,
  p_max_in_flight integer, p_max_retained integer, p_field_hashes text,
  p_lease_owner text, p_lease_seconds float8,
  p_status text DEFAULT 'PROCESSING', p_http_status integer DEFAULT NULL,
  p_response_body text DEFAULT NULL, p_resource_id text DEFAULT NULL)
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
                                     field_hashes, owner_token, lease_until, http_status, response_body, resource_id)
    SELECT p_scope_key, p_request_hash, p_status, p_user_scope, p_operation,
           now() + make_interval(secs => p_ttl_seconds), free_slot.slot, p_field_hashes, p_lease_owner,
           CASE WHEN p_lease_owner IS NULL THEN NULL ELSE now() + make_interval(secs => p_lease_seconds) END,
           p_http_status, p_response_body, p_resource_id
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
$fn$;
`),
};
