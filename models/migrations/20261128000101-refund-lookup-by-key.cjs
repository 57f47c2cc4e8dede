'use strict';
// idem_refund_lookup (20261127000801) found the payment to refund with
//   SELECT … FROM payments p WHERE p.id = p_payment_id AND p.merchant_id = p_merchant_id FOR UPDATE
// and PL/pgSQL keeps that statement's plan for the session. Planned while the table had no
// statistics (a new database, or the minute before autovacuum's first ANALYZE), the two indexes that
// match look alike to the planner (rows=1 each), and it chose payments_merchant_order_key: an index
// scan on merchant_id alone, every payment of the merchant read and filtered on id. Seen in the bench
// (auto_explain, 2026-11-27): 655 to 1,425 rows removed by the filter, 0.2–3.6 ms a refund, and the
// plan kept until an ANALYZE invalidated it. A merchant with a million payments would read a million
// index entries for each refund, on the money path, with the payment's row lock to come.
//
// Now every statement on payments here names its primary key alone, so that no statistics can choose
// another index: the merchant is read first without a lock (another merchant's payment is never
// locked, not even for the rest of a refused Tx 1), and the row is then locked by its key. The
// merchant of a payment never changes, so the check before the lock stays true under it. Same
// answers as before: no row when the payment is not this merchant's or the claim did not happen here.
//
// CREATE OR REPLACE: safe to run twice; down() puts back 20261127000801's text.
const up = `
CREATE OR REPLACE FUNCTION idem_refund_lookup(p_scope_key text, p_payment_id text, p_merchant_id text)
RETURNS TABLE ("userId" text, "merchantOrderNo" text, amount text, currency text, status text,
               "paymentNo" text, "chargeId" text, taken text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_merchant_id text;
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
  SELECT p.merchant_id::text INTO v_merchant_id FROM payments p WHERE p.id = p_payment_id;
  IF v_merchant_id IS DISTINCT FROM p_merchant_id THEN
    RETURN;
  END IF;
  SELECT p.user_id::text, p.merchant_order_no::text, p.amount::text, p.currency::text, p.status::text,
         p.payment_no::text, p.charge_id::text
    INTO v_user_id, v_merchant_order_no, v_amount, v_currency, v_status, v_payment_no, v_charge_id
    FROM payments p WHERE p.id = p_payment_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT coalesce(sum(r.amount), 0)::text INTO v_taken
    FROM refunds r WHERE r.payment_id = p_payment_id AND r.status IN ('SUCCEEDED', 'PROCESSING');
  RETURN QUERY SELECT v_user_id, v_merchant_order_no, v_amount, v_currency, v_status, v_payment_no,
                      v_charge_id, v_taken;
END
$fn$;
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  // 20261127000801's up() is CREATE OR REPLACE of this function and of idem_finish_refund (unchanged).
  down: (queryInterface) => require('./20261127000801-refund-functions.cjs').up(queryInterface),
};
