'use strict';
// The payment's two statements with the most planning left in them, as PL/pgSQL functions (the
// reason is that of 20261124000001-hot-path-functions: a function keeps its statements' plans per
// session, where SQL sent as text is planned on every request; it is a schema object, safe behind a
// pooler in transaction mode). pg_stat_statements with track_planning, per payment: the lookup
// planned in 0.11 ms and ran in 0.10; Tx 2 planned in 0.21 ms and ran in 0.19.
//
// idem_payment_lookup: the order of a merchantOrderNo and the payment it already has, if any, in one
// row (payments/prepare.ts; sent in Tx 1 after the claim, in the claim's round trip).
//
// idem_finish_payment: Tx 2 of a payment (payments/finalise.ts), one statement and so atomic without
// a transaction: the record leaves PROCESSING with its final answer only while the lease is ours
// (owner token and status); only then is its in-flight slot freed and are the payment and, for a
// successful charge, the order updated. Returns 1, or 0 when fenced off (nothing written). The
// record's part is the same as idempotency/lease.ts finishParts (leaveProcessingCtes), which the
// other Mode B writes keep using.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION idem_payment_lookup(p_tenant_id text, p_merchant_order_no text)
RETURNS TABLE ("orderId" text, "orderUserId" text, "orderAmount" text, "orderCurrency" text, id text,
               "paymentNo" text, "merchantId" text, "merchantOrderNo" text, "paymentOrderId" text,
               "userId" text, amount text, currency text, description text, status text,
               "failureReason" text, "chargeId" text, "resumableSince" timestamptz,
               "createdAt" timestamptz, "updatedAt" timestamptz)
LANGUAGE plpgsql STABLE AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT o.id::text, o.user_id::text, o.amount::text, o.currency::text, p.id::text, p.payment_no::text,
         p.merchant_id::text, p.merchant_order_no::text, p.order_id::text, p.user_id::text,
         p.amount::text, p.currency::text, p.description::text, p.status::text,
         p.failure_reason::text, p.charge_id::text, p.resumable_since, p.created_at, p.updated_at
  FROM orders o
  LEFT JOIN payments p ON p.merchant_id = o.tenant_id AND p.merchant_order_no = o.merchant_order_no
  WHERE o.tenant_id = p_tenant_id AND o.merchant_order_no = p_merchant_order_no;
END
$fn$;

CREATE OR REPLACE FUNCTION idem_finish_payment(
  p_scope_key text, p_owner text, p_record_status text, p_http_status integer, p_response_body text,
  p_payment_status text, p_failure_reason text, p_charge_id text, p_updated_at timestamptz,
  p_payment_id text, p_order_id bigint, p_succeeded boolean)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
  v_user_scope text;
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
  UPDATE payments p
     SET status = p_payment_status, failure_reason = p_failure_reason, charge_id = p_charge_id,
         resumable_since = NULL, updated_at = p_updated_at
   WHERE p.id = p_payment_id;
  IF p_succeeded THEN
    UPDATE orders o SET status = 'PAID', updated_at = p_updated_at WHERE o.id = p_order_id;
  END IF;
  RETURN 1;
END
$fn$;
`),
  down: (queryInterface) =>
    queryInterface.sequelize.query(`
      DROP FUNCTION IF EXISTS idem_finish_payment(text, text, text, integer, text, text, text, text, timestamptz, text, bigint, boolean);
      DROP FUNCTION IF EXISTS idem_payment_lookup(text, text);
    `),
};
