'use strict';
// Refunds (issue 27 part 3, CONTRACT section 10): the refunds table, the payment's amount_refunded,
// the refund events, and the payment lookup with amount_refunded.
//
// - refunds: one row per refund (each Idempotency-Key is its own refund: there is no business key).
//   refund_no is the gateway's idempotency key, generated once. user_id is the payment's owner (the
//   order's owner), so that the owner reads a refund an admin made. resumable_since marks a refund
//   whose last attempt certainly refunded nothing (the effect mechanism's column, as on payments).
//   The index (payment_id, created_at, id) serves both the list (oldest first) and Tx 1's sum of a
//   payment's SUCCEEDED and PROCESSING refunds under the payment's row lock (payments/refund-prepare.ts).
// - payments.amount_refunded grows in the refund's fenced Tx 2, in the same statement as the refund's
//   final state (payments/refund-finalise.ts). The CHECK is a last line: the strict cap is Tx 1's sum
//   under the payment's row lock; the database refuses a state where more was refunded than paid.
// - refunds_event: refund.succeeded / refund.failed when a refund becomes final, exactly like
//   payments_event (20261127000001-events-outbox).
// - idem_payment_lookup_refunded: idem_payment_lookup (20261124000002) with amount_refunded, so that a
//   new key for a paid order replays the payment as it stands. A function of its own name: changing
//   the old one's result type would make 20261124000002's CREATE OR REPLACE fail when it runs again
//   (a crash before its record: test/ops/migrations.test.ts).
const up = `
ALTER TABLE payments ADD COLUMN IF NOT EXISTS amount_refunded NUMERIC(14,2) NOT NULL DEFAULT 0;
DO $do$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'payments_refunded_within_amount') THEN
    ALTER TABLE payments ADD CONSTRAINT payments_refunded_within_amount
      CHECK (amount_refunded >= 0 AND amount_refunded <= amount);
  END IF;
END
$do$;

CREATE TABLE IF NOT EXISTS refunds (
  id VARCHAR(100) PRIMARY KEY,
  refund_no VARCHAR(64) NOT NULL UNIQUE,
  payment_id VARCHAR(100) NOT NULL REFERENCES payments (id),
  merchant_id VARCHAR(36) NOT NULL,
  user_id BIGINT NOT NULL,
  merchant_order_no VARCHAR(64) NOT NULL,
  amount NUMERIC(14,2) NOT NULL CHECK (amount > 0),
  currency CHAR(3) NOT NULL,
  reason VARCHAR(200),
  status VARCHAR(12) NOT NULL DEFAULT 'PROCESSING' CHECK (status IN ('PROCESSING', 'SUCCEEDED', 'FAILED')),
  failure_reason VARCHAR(40),
  gateway_refund_id VARCHAR(100),
  resumable_since TIMESTAMPTZ,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS refunds_payment_idx ON refunds (payment_id, created_at, id);
CREATE INDEX IF NOT EXISTS refunds_resumable_idx ON refunds (resumable_since) WHERE resumable_since IS NOT NULL;

CREATE OR REPLACE FUNCTION refunds_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.status IN ('SUCCEEDED', 'FAILED')
     AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status) THEN
    PERFORM event_emit(NEW.merchant_id, NEW.user_id, 'refund.' || lower(NEW.status), NEW.id, to_jsonb(NEW));
  END IF;
  RETURN NULL;
END
$fn$;
DROP TRIGGER IF EXISTS refunds_event ON refunds;
CREATE TRIGGER refunds_event AFTER INSERT OR UPDATE OF status ON refunds
  FOR EACH ROW EXECUTE FUNCTION refunds_event();

CREATE OR REPLACE FUNCTION idem_payment_lookup_refunded(p_tenant_id text, p_merchant_order_no text)
RETURNS TABLE ("orderId" text, "orderUserId" text, "orderAmount" text, "orderCurrency" text, id text,
               "paymentNo" text, "merchantId" text, "merchantOrderNo" text, "paymentOrderId" text,
               "userId" text, amount text, currency text, description text, status text,
               "failureReason" text, "chargeId" text, "resumableSince" timestamptz,
               "createdAt" timestamptz, "updatedAt" timestamptz, "amountRefunded" text)
LANGUAGE plpgsql STABLE AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT o.id::text, o.user_id::text, o.amount::text, o.currency::text, p.id::text, p.payment_no::text,
         p.merchant_id::text, p.merchant_order_no::text, p.order_id::text, p.user_id::text,
         p.amount::text, p.currency::text, p.description::text, p.status::text,
         p.failure_reason::text, p.charge_id::text, p.resumable_since, p.created_at, p.updated_at,
         p.amount_refunded::text
  FROM orders o
  LEFT JOIN payments p ON p.merchant_id = o.tenant_id AND p.merchant_order_no = o.merchant_order_no
  WHERE o.tenant_id = p_tenant_id AND o.merchant_order_no = p_merchant_order_no;
END
$fn$;
`;

const down = `
DROP FUNCTION IF EXISTS idem_payment_lookup_refunded(text, text);
DROP TRIGGER IF EXISTS refunds_event ON refunds;
DROP FUNCTION IF EXISTS refunds_event();
DROP TABLE IF EXISTS refunds;
ALTER TABLE payments DROP CONSTRAINT IF EXISTS payments_refunded_within_amount;
ALTER TABLE payments DROP COLUMN IF EXISTS amount_refunded;
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
