import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes, type Sequelize } from 'sequelize';
import type { Charge, Ledger } from '../../gateway/types.js';

export interface PaymentRow {
  id: string;
  paymentNo: string;
  merchantOrderNo: string;
  orderId: string;
  amount: string;
  currency: string;
  status: 'PROCESSING' | 'SUCCEEDED' | 'FAILED';
  failureReason: string | null;
  chargeId: string | null;
}

interface OrderRow {
  id: string;
  merchantOrderNo: string;
  status: 'CREATED' | 'PAID';
}

interface RecordRow {
  scopeKey: string;
  status: string;
  resourceId: string | null;
  leaseUntil: Date | null;
}

export interface InvariantOptions {
  /**
   * The test made the gateway ignore idempotency keys, so a paymentNo may have been charged more
   * than once: every extra SUCCEEDED charge must then have been refunded (compensated).
   */
  gatewayIgnoresKeys?: boolean;
  /**
   * The ledger belongs to this database's instances only: then every charge in it must belong to a
   * payment of the database (a charge nobody knows about is money taken and lost).
   */
  exclusiveLedger?: boolean;
  /** How long the leases and the recoverer get to settle every PROCESSING record (default 20 s). */
  settleMs?: number;
}

const selectRows = <T extends object>(sequelize: Sequelize, sql: string, bind: unknown[]) =>
  sequelize.query<T>(sql, { bind, type: QueryTypes.SELECT });

function recordsOf(sequelize: Sequelize, tenant: string) {
  return selectRows<RecordRow>(
    sequelize,
    `SELECT scope_key AS "scopeKey", status, resource_id AS "resourceId", lease_until AS "leaseUntil"
     FROM idempotency_records WHERE split_part(user_scope, ':', 1) = $1`,
    [tenant],
  );
}

/**
 * The invariants every payment fault test ends with, for one tenant:
 * 1. no idempotency record stays PROCESSING once the leases and the recoverer have run (polled,
 *    bounded by `settleMs`; never a duration assertion);
 * 2. one payment per (merchant_id, merchant_order_no), and paymentNos are unique;
 * 3. one charge per paymentNo at the gateway (or, with `gatewayIgnoresKeys`, every extra successful
 *    charge refunded);
 * 4. every SUCCEEDED payment has exactly one live SUCCEEDED ledger charge (its chargeId, amount and
 *    currency), and its order is PAID; every FAILED payment was DECLINED by the gateway and its order
 *    is still CREATED; a payment left PROCESSING (its record FAILED_RETRYABLE: nothing was sent) has
 *    no charge at all; no order is PAID without a SUCCEEDED payment.
 * `ledger` is read after settling, so pass the function when the gateway may still be charging.
 * Returns the tenant's payments for further assertions.
 */
export async function assertPaymentInvariants(
  sequelize: Sequelize,
  ledger: Ledger | (() => Promise<Ledger>),
  tenant: string,
  opts: InvariantOptions = {},
): Promise<PaymentRow[]> {
  const deadline = Date.now() + (opts.settleMs ?? 20000);
  let records = await recordsOf(sequelize, tenant);
  while (records.some((r) => r.status === 'PROCESSING') && Date.now() < deadline) {
    await sleep(100);
    records = await recordsOf(sequelize, tenant);
  }
  expect(
    records.filter((r) => r.status === 'PROCESSING'),
    'idempotency records still PROCESSING after the leases and the recoverer ran',
  ).to.deep.equal([]);

  const payments = await selectRows<PaymentRow>(
    sequelize,
    `SELECT id, payment_no AS "paymentNo", merchant_order_no AS "merchantOrderNo", order_id::text AS "orderId",
            amount::text AS amount, currency, status, failure_reason AS "failureReason", charge_id AS "chargeId"
     FROM payments WHERE merchant_id = $1`,
    [tenant],
  );
  const orders = await selectRows<OrderRow>(
    sequelize,
    `SELECT id::text AS id, merchant_order_no AS "merchantOrderNo", status FROM orders WHERE tenant_id = $1`,
    [tenant],
  );
  const book = typeof ledger === 'function' ? await ledger() : ledger;
  const refunded = new Set(book.refunds.map((r) => r.chargeId));
  const chargesOf = (paymentNo: string) => book.charges.filter((c) => c.paymentNo === paymentNo);
  const problems: string[] = [];

  const byOrderNo = new Map<string, number>();
  for (const p of payments) byOrderNo.set(p.merchantOrderNo, (byOrderNo.get(p.merchantOrderNo) ?? 0) + 1);
  for (const [orderNo, n] of byOrderNo)
    if (n > 1) problems.push(`${n} payments for merchantOrderNo ${orderNo}`);
  if (new Set(payments.map((p) => p.paymentNo)).size !== payments.length)
    problems.push('duplicate paymentNo');

  const orderById = new Map(orders.map((o) => [o.id, o]));
  for (const p of payments) {
    const charges = chargesOf(p.paymentNo);
    const live = charges.filter((c) => !refunded.has(c.chargeId));
    const liveSucceeded = live.filter((c) => c.status === 'SUCCEEDED');
    const label = `payment ${p.id} (${p.merchantOrderNo}, ${p.paymentNo}, ${p.status})`;
    if (opts.gatewayIgnoresKeys) {
      if (liveSucceeded.length > 1) problems.push(`${label}: ${liveSucceeded.length} unrefunded charges`);
    } else if (charges.length > 1) {
      problems.push(`${label}: charged ${charges.length} times`);
    }
    const order = orderById.get(p.orderId);
    if (!order) problems.push(`${label}: its order ${p.orderId} is missing`);
    if (p.status === 'SUCCEEDED') {
      const charge: Charge | undefined = liveSucceeded[0];
      if (liveSucceeded.length !== 1) problems.push(`${label}: ${liveSucceeded.length} live ledger charges`);
      else if (charge.chargeId !== p.chargeId) problems.push(`${label}: chargeId ${p.chargeId} != ledger`);
      else if (Number(charge.amount) !== Number(p.amount) || charge.currency !== p.currency)
        problems.push(`${label}: ledger charged ${charge.amount} ${charge.currency}`);
      if (order && order.status !== 'PAID') problems.push(`${label}: order is ${order.status}`);
    } else if (p.status === 'FAILED') {
      if (p.failureReason !== 'DECLINED') problems.push(`${label}: failureReason ${p.failureReason}`);
      if (!charges.some((c) => c.status === 'DECLINED' && c.chargeId === p.chargeId))
        problems.push(`${label}: no DECLINED ledger charge ${p.chargeId}`);
      if (liveSucceeded.length > 0) problems.push(`${label}: a successful charge behind a FAILED payment`);
      if (order && order.status !== 'CREATED') problems.push(`${label}: order is ${order.status}`);
    } else {
      // Only FAILED_RETRYABLE (certainly not charged) may leave a payment PROCESSING at rest.
      if (charges.length > 0) problems.push(`${label}: PROCESSING at rest although the gateway charged it`);
      if (!records.some((r) => r.resourceId === p.id && r.status === 'FAILED_RETRYABLE'))
        problems.push(`${label}: PROCESSING at rest without a FAILED_RETRYABLE record`);
    }
  }
  const paidWithout = orders.filter(
    (o) => o.status === 'PAID' && !payments.some((p) => p.orderId === o.id && p.status === 'SUCCEEDED'),
  );
  for (const o of paidWithout) problems.push(`order ${o.id} (${o.merchantOrderNo}) PAID without a payment`);

  if (opts.exclusiveLedger) {
    const known = await selectRows<{ paymentNo: string }>(
      sequelize,
      'SELECT payment_no AS "paymentNo" FROM payments WHERE payment_no = ANY($1)',
      [[...new Set(book.charges.map((c) => c.paymentNo))]],
    );
    const knownNos = new Set(known.map((k) => k.paymentNo));
    for (const c of book.charges)
      if (!knownNos.has(c.paymentNo)) problems.push(`ledger charge ${c.chargeId} of unknown ${c.paymentNo}`);
  }
  expect(problems, 'payment invariants').to.deep.equal([]);
  return payments;
}
