import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import type { Payment } from '../models/payment.js';
import { chargePayment } from './charge.js';
import { finalisePayment } from './finalise.js';
import type { PaymentDeps } from './payment-deps.js';
import { queryCharge } from './query.js';

export type Settlement =
  /** Charged or declined, and finalised under our lease. */
  | { kind: 'final'; reply: Reply }
  /** The outcome is unknown for now; a retry or the recoverer resolves it later: a retry is useful
   * after `retryAfterMs` (the lease we keep, or at once when we gave it up). */
  | { kind: 'pending'; retryAfterMs: number }
  /** Certainly not charged (refused connection or a 5xx): a retry may charge again. */
  | { kind: 'not_charged' }
  /** Someone took the attempt over while we worked: they own its outcome. */
  | { kind: 'fenced' };

/**
 * The gateway part of a payment under a lease. `first: 'query'` when continuing someone else's
 * attempt: a lease alone does not prove that their call failed, so the gateway is asked before any
 * charge (query-before-charge). `first: 'resume'` for a resumable payment (every earlier attempt
 * certainly charged nothing): asked first too, and when the gateway cannot answer nothing has been
 * sent in this attempt either, so it stays not charged (503 again, still resumable). Shared by
 * requests, the background recoverer and nothing else: reconcile only ever queries.
 */
export async function settlePayment(
  deps: PaymentDeps,
  lease: Lease,
  payment: Payment,
  first: 'charge' | 'query' | 'resume',
): Promise<Settlement> {
  if (first !== 'charge') {
    const found = await queryCharge(deps, payment);
    if (found.kind === 'found') return finalisePayment(deps, lease, payment, found.charge);
    if (found.kind === 'unavailable' && first === 'resume') return { kind: 'not_charged' };
    if (found.kind === 'unavailable') {
      // Cannot tell whether it was charged: never charge blind. Free the lease for the next try.
      await deps.engine.leases.release(lease);
      return { kind: 'pending', retryAfterMs: 0 };
    }
  }
  const charged = await chargePayment(deps, payment);
  if (charged.kind === 'charged' || charged.kind === 'declined') {
    return finalisePayment(deps, lease, payment, charged.charge);
  }
  if (charged.kind === 'not-charged') return { kind: 'not_charged' };
  // Sent, outcome unknown (time-out, reset): ask before anything else.
  const found = await queryCharge(deps, payment);
  if (found.kind === 'found') return finalisePayment(deps, lease, payment, found.charge);
  // Still unknown: keep the lease (the charge may yet land); a retry or the recoverer resolves it later,
  // once the lease has ended: what is left of it (the charge and the query took part of it already).
  return { kind: 'pending', retryAfterMs: Math.max(0, lease.until - Date.now()) };
}
