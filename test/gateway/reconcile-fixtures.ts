// Rows for the reconcile tests, written straight into the shared test database (one tenant per test,
// so other tests running against the same database never see or touch them).
import { randomBytes } from 'node:crypto';
import { IdempotencyRecord, Order, Payment } from '../../models/index.js';
import type { PaymentStatus } from '../../models/payment.js';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/**
 * Not 'payments.create': the shared server's recoverer takes over expired leases of that operation
 * only, and would otherwise race these tests for the very records they hand to reconcile (which
 * finds a payment's records by resource id, whatever their operation).
 */
export const TEST_OPERATION = 'payments.create.reconcile-test';

export async function paymentRow(
  tenant: string,
  status: PaymentStatus,
  opts: { chargeId?: string; amount?: string } = {},
): Promise<Payment> {
  const merchantOrderNo = `mo-${hex(6)}`;
  const amount = opts.amount ?? '25.00';
  const order = await Order.create({
    tenantId: tenant,
    userId: '1',
    merchantOrderNo,
    amount,
    currency: 'USD',
    description: null,
    status: status === 'SUCCEEDED' ? 'PAID' : 'CREATED',
  });
  return Payment.create({
    id: `pay_${hex(12)}`,
    paymentNo: `PN${hex(16)}`,
    merchantId: tenant,
    merchantOrderNo,
    orderId: order.id,
    userId: '1',
    amount,
    currency: 'USD',
    description: null,
    status,
    failureReason: status === 'FAILED' ? 'DECLINED' : null,
    chargeId: opts.chargeId ?? null,
  });
}

/**
 * The PROCESSING record of an executor that charged and then stopped (crashed, or still working), for
 * the payment with this id (which may be missing), under `operation` (the recoverer's own is
 * 'payments.create').
 */
export async function processingRecord(
  tenant: string,
  payment: Pick<Payment, 'id'>,
  leaseUntil: Date,
  operation = TEST_OPERATION,
) {
  return IdempotencyRecord.create({
    scopeKey: `${tenant}:1:${operation}:${hex(8)}`,
    requestHash: hex(32),
    status: 'PROCESSING',
    resourceId: payment.id,
    responseBody: null,
    httpStatus: null,
    ownerToken: hex(32),
    leaseUntil,
    userScope: `${tenant}:1`,
    operation,
    expiresAt: new Date(Date.now() + 24 * 3600 * 1000),
  });
}

export const minutesFromNow = (minutes: number) => new Date(Date.now() + minutes * 60 * 1000);
