import type { Lease } from '../idempotency/lease.js';
import { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';

/**
 * Takes over an attempt whose executor's lease ended (it crashed, stalled, or gave up on an unknown
 * outcome): a conditional update naming the previous owner, so among requests, recoverers and
 * reconcile runs on any instance exactly one wins. undefined: someone else won, or it moved on.
 */
export function takeOverPayment(deps: PaymentDeps, scopeKey: string, previousOwner: string | null) {
  return deps.engine.leases.takeOver(scopeKey, previousOwner);
}

/** The payment a record points at (its resource id). */
export async function paymentOfRecord(resourceId: string): Promise<Payment> {
  const payment = await Payment.findByPk(resourceId);
  if (!payment) throw new Error(`payment ${resourceId} of an idempotency record is missing`);
  return payment;
}

export type { Lease };
