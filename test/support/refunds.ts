import { expect } from 'chai';
import { QueryTypes, type Sequelize } from 'sequelize';
import { canonicalAmount } from '../../core/money.js';
import type { Ledger } from '../../gateway/types.js';
import { type HttpResult, http } from './http.js';
import { createOrder } from './orders.js';
import { payUntilFinal } from './payment-calls.js';
import { sharedServer } from './server.js';
import { idempotencyKey } from './tokens.js';

/** An order of `auth`'s user, paid (201 SUCCEEDED) on the given instance (undefined: the shared server). */
export async function paidPayment(
  baseUrl: string | undefined,
  auth: Record<string, string>,
  amount = '100.00',
  merchantOrderNo = `mo-${idempotencyKey().slice(4, 20)}`,
) {
  await createOrder(baseUrl, auth, merchantOrderNo, amount);
  const body = { merchantOrderNo, amount };
  const base = baseUrl ?? (await sharedServer()).url;
  const { final } = await payUntilFinal(base, auth, idempotencyKey(), body);
  expect(final.status, final.text).to.equal(201);
  expect(final.body.data.status).to.equal('SUCCEEDED');
  return final.body.data as { id: string; paymentNo: string; amount: string; amountRefunded: string };
}

/** POST /api/v1/payments/{id}/refunds with an Idempotency-Key; status 0 when no answer came. */
export async function refund(
  baseUrl: string | undefined,
  auth: Record<string, string>,
  paymentId: string,
  key: string,
  body: Record<string, unknown> = {},
): Promise<HttpResult> {
  try {
    return await http('POST', `/api/v1/payments/${encodeURIComponent(paymentId)}/refunds`, {
      baseUrl,
      headers: { ...auth, 'Idempotency-Key': key },
      body,
    });
  } catch (err) {
    return { status: 0, headers: new Headers(), body: undefined, text: String(err) };
  }
}

const cents = (a: string) => Number(BigInt(canonicalAmount(a).replace('.', '')));

interface PaymentRefundRow {
  id: string;
  paymentNo: string;
  amount: string;
  amountRefunded: string;
  succeeded: string;
  open: string;
}

/**
 * The refund invariants of one tenant's payments (CONTRACT section 10), from the rows and the
 * gateway's ledger: SUCCEEDED + PROCESSING refunds never add up to more than the payment; its
 * amount_refunded equals its SUCCEEDED refunds; every SUCCEEDED refund row is one SUCCEEDED refund at
 * the gateway under its refundNo; and (once nothing is PROCESSING, `settled`) the ledger's
 * SUCCEEDED refunds of the payment add up to amount_refunded and no refundNo was refunded twice.
 */
export async function assertRefundInvariants(
  sequelize: Sequelize,
  ledger: () => Promise<Ledger>,
  tenant: string,
  opts: { settled?: boolean } = {},
): Promise<PaymentRefundRow[]> {
  const payments = await sequelize.query<PaymentRefundRow>(
    `SELECT p.id, p.payment_no AS "paymentNo", p.amount::text AS amount, p.amount_refunded::text AS "amountRefunded",
            coalesce(sum(r.amount) FILTER (WHERE r.status = 'SUCCEEDED'), 0)::text AS succeeded,
            coalesce(sum(r.amount) FILTER (WHERE r.status IN ('SUCCEEDED', 'PROCESSING')), 0)::text AS open
     FROM payments p LEFT JOIN refunds r ON r.payment_id = p.id
     WHERE p.merchant_id = $1 GROUP BY p.id`,
    { bind: [tenant], type: QueryTypes.SELECT },
  );
  const rows = await sequelize.query<{ refundNo: string; status: string; amount: string }>(
    `SELECT refund_no AS "refundNo", status, amount::text AS amount FROM refunds WHERE merchant_id = $1`,
    { bind: [tenant], type: QueryTypes.SELECT },
  );
  const { refunds } = await ledger();
  for (const p of payments) {
    expect(cents(p.open), `payment ${p.id}: refunds within its amount`).to.be.at.most(cents(p.amount));
    expect(cents(p.amountRefunded), `payment ${p.id}: amountRefunded = its SUCCEEDED refunds`).to.equal(
      cents(p.succeeded),
    );
    if (opts.settled) {
      const atGateway = refunds
        .filter((r) => r.paymentNo === p.paymentNo && r.refundNo && r.status === 'SUCCEEDED')
        .reduce((n, r) => n + cents(r.amount ?? '0'), 0);
      expect(atGateway, `payment ${p.id}: ledger refunds = amountRefunded`).to.equal(cents(p.amountRefunded));
    }
  }
  for (const r of rows) {
    const made = refunds.filter((l) => l.refundNo === r.refundNo);
    if (opts.settled) expect(made.length, `refund ${r.refundNo}: made once`).to.be.at.most(1);
    if (r.status === 'SUCCEEDED') expect(made.map((l) => l.status)).to.include('SUCCEEDED');
    if (r.status === 'FAILED') expect(made.map((l) => l.status)).to.not.include('SUCCEEDED');
    if (opts.settled) expect(r.status, `refund ${r.refundNo} settled`).to.not.equal('PROCESSING');
  }
  return payments;
}
