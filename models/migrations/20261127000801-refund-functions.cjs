'use strict';
// A refund's two statements of Tx 1 after the claim and its Tx 2, as PL/pgSQL functions (the reason
// of 20261124000002-payment-functions: a function keeps its statements' plans per session, where SQL
// sent as text is planned on every request). Before this migration a refund took 6 round trips to a
// payment's 4: the payment's row lock and the sum of its refunds were one each, after the claim's.
// pg_stat_statements with track_planning, per refund: the lock planned in 0.10 ms, the sum in 0.14,
// Tx 2's statement of CTEs in 0.34 (the payment's Tx 2, a function, 0.02).
//
// idem_refund_lookup: the payment to refund, locked (FOR UPDATE), and the sum of its SUCCEEDED and
// PROCESSING refunds (payments/refund-prepare.ts), sent in Tx 1 after the claim, in the claim's round
// trip. It locks and reads only when the claim of this very key happened in this transaction
// (idem_claim's transaction-local mark, idempotency/caps.ts claimedGuard): a request whose claim found
// a record, or was refused by a cap, takes no lock. The sum is a statement of its own, after the lock:
// a VOLATILE function takes a new snapshot for each statement under READ COMMITTED, so it sees every
// refund committed by the transactions that held the lock before (the strict cap, CONTRACT section 10).
// No row: no such payment of this merchant, or not claimed.
//
// idem_finish_refund: Tx 2 of a refund (payments/refund-finalise.ts), one statement and so atomic
// without a transaction: the record leaves PROCESSING with its final answer only while the lease is
// ours (owner token and status); only then is its in-flight slot freed and does the refund, if still
// PROCESSING, become final, and, when the gateway refunded, the payment's amount_refunded grow by the
// refund's amount (only through the refund's own update: no path adds one refund's amount twice).
// Returns 1, or 0 when fenced off (nothing written). The same writes as the statement of CTEs it
// replaces (idempotency/lease.ts finishParts and the refund's and payment's updates).
//
// New names: safe to run twice (CREATE OR REPLACE), and down() drops them.
const up = `
CREATE OR REPLACE FUNCTION idem_refund_lookup(p_scope_key text, p_payment_id text, p_merchant_id text)
RETURNS TABLE ("userId" text, "merchantOrderNo" text, amount text, currency text, status text,
               "paymentNo" text, "chargeId" text, taken text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_user_id text;
  v_merchant_order_no text;
  v_amount text;
  v_currency text;
  v_status text;
  v_payment_no text;
  v_charge_id text;
  v_taken text;
BEGIN
  IF current_setting('idem.claimed', true) IS DISTINCT FROM p_scope_key THEN
    RETURN;
  END IF;
  SELECT p.user_id::text, p.merchant_order_no::text, p.amount::text, p.currency::text, p.status::text,
         p.payment_no::text, p.charge_id::text
    INTO v_user_id, v_merchant_order_no, v_amount, v_currency, v_status, v_payment_no, v_charge_id
    FROM payments p WHERE p.id = p_payment_id AND p.merchant_id = p_merchant_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT coalesce(sum(r.amount), 0)::text INTO v_taken
    FROM refunds r WHERE r.payment_id = p_payment_id AND r.status IN ('SUCCEEDED', 'PROCESSING');
  RETURN QUERY SELECT v_user_id, v_merchant_order_no, v_amount, v_currency, v_status, v_payment_no,
                      v_charge_id, v_taken;
END
$fn$;

CREATE OR REPLACE FUNCTION idem_finish_refund(
  p_scope_key text, p_owner text, p_record_status text, p_http_status integer, p_response_body text,
  p_refund_status text, p_failure_reason text, p_gateway_refund_id text, p_updated_at timestamptz,
  p_refund_id text, p_succeeded boolean)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
  v_user_scope text;
  v_payment_id text;
  v_amount numeric;
BEGIN
  UPDATE idempotency_records r
     SET status = p_record_status, http_status = p_http_status, response_body = p_response_body,
         owner_token = NULL, lease_until = NULL, updated_at = now()
   WHERE r.scope_key = p_scope_key AND r.owner_token = p_owner AND r.status = 'PROCESSING'
  RETURNING r.user_scope INTO v_user_scope;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  UPDATE idempotency_slots s SET holder = NULL WHERE s.user_scope = v_user_scope AND s.holder = p_scope_key;
  UPDATE refunds f
     SET status = p_refund_status, failure_reason = p_failure_reason, gateway_refund_id = p_gateway_refund_id,
         resumable_since = NULL, updated_at = p_updated_at
   WHERE f.id = p_refund_id AND f.status = 'PROCESSING'
  RETURNING f.payment_id, f.amount INTO v_payment_id, v_amount;
  IF FOUND AND p_succeeded THEN
    UPDATE payments p SET amount_refunded = p.amount_refunded + v_amount, updated_at = p_updated_at
     WHERE p.id = v_payment_id;
  END IF;
  RETURN 1;
END
$fn$;
`;

const down = `
DROP FUNCTION IF EXISTS idem_finish_refund(text, text, text, integer, text, text, text, text, timestamptz, text, boolean);
DROP FUNCTION IF EXISTS idem_refund_lookup(text, text, text);
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
