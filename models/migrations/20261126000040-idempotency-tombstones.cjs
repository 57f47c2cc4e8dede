'use strict';
// Purged keys are never executed again (issue 26; CONTRACT section 5, 40905). Purging a record
// leaves a tombstone: the sha256 of its scope key and of its request digest, and when the tombstone
// itself is purged (IDEMPOTENCY_TOMBSTONE_DAYS after). No body, nothing per user: tombstones count
// towards no cap. The purge writes it in the statement that deletes the record
// (idempotency/caps.ts deleteRecordsStatement), holding the key's advisory lock.
//
// idem_claim (same signature as 20261126000001, so OR REPLACE: safe to run twice and never a moment
// without it) refuses a tombstoned key after taking that lock, with SQLSTATE IK905 and HINT
// 'idem_claim: key expired' (idempotency/tombstones.ts): the transaction, and idem_execute's whole
// statement with it, writes nothing. down() puts back 20261126000001's body, then drops the table.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE TABLE IF NOT EXISTS idempotency_tombstones (
  scope_digest bytea PRIMARY KEY,
  request_digest bytea NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_tombstones_expires_at ON idempotency_tombstones (expires_at);

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
    -- A purged key is never executed again. This check comes after the key's lock and in a statement
    -- of its own: the purge deletes the record and writes its tombstone holding the same lock
    -- (idempotency/caps.ts deleteRecordsStatement), so under READ COMMITTED this statement's new
    -- snapshot sees the purge's commit. Checked before the lock, a purge committing in between would
    -- leave this claim seeing neither the record nor the tombstone, and its insert would execute the
    -- key a second time.
    IF EXISTS (SELECT 1 FROM idempotency_tombstones tb
               WHERE tb.scope_digest = sha256(convert_to(p_scope_key, 'UTF8')) AND tb.expires_at > now()) THEN
      RAISE EXCEPTION USING ERRCODE = 'IK905', MESSAGE = 'idempotency key expired (tombstone)',
        HINT = 'idem_claim: key expired';
    END IF;
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
  down: async (queryInterface) => {
    await require('./20261126000001-claim-busy-marker.cjs').up(queryInterface);
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS idempotency_tombstones');
  },
};
