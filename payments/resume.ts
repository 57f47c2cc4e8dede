import { Op, type Transaction } from 'sequelize';
import { inTransaction } from '../core/database.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';

/**
 * Takes the payment's resumable mark, inside the caller's transaction: a conditional update, so of
 * any number of resumers (the same key retried, new keys, on any instance) exactly one wins and
 * executes the payment again. false: not resumable (in flight elsewhere, or final).
 */
export async function takeResume(t: Transaction, paymentId: string): Promise<boolean> {
  const [count] = await Payment.update(
    { resumableSince: null },
    {
      where: { id: paymentId, status: 'PROCESSING', resumableSince: { [Op.ne]: null } },
      transaction: t,
    },
  );
  return count === 1;
}

export type Resumption =
  /** We won the resume: the record is ours again under a fresh lease. */
  | { kind: 'resumed'; lease: Lease }
  /** The payment became final through another key's resume: its answer, now stored for this key too. */
  | { kind: 'final'; reply: Reply }
  /** Another executor is at work on it. */
  | { kind: 'in_flight' }
  /** The record moved on meanwhile: look again. */
  | { kind: 'moved' }
  /** The user is at the in-flight cap: this resume would be one more PROCESSING record. */
  | { kind: 'limited' };

/**
 * A retry with the same key finds its record FAILED_RETRYABLE (the last attempt certainly charged
 * nothing). The payment decides: resumable → take the mark and the record together (one winner);
 * final → this key gets the final answer; PROCESSING without the mark → someone resumed it first.
 */
export function resumePayment(
  deps: PaymentDeps,
  scope: { scopeKey: string; userScope: string },
  paymentId: string,
): Promise<Resumption> {
  const { scopeKey, userScope } = scope;
  return inTransaction<Resumption>(deps.sequelize, async (t) => {
    if (await takeResume(t, paymentId)) {
      if (!(await deps.engine.leases.takeSlot(t, userScope, scopeKey)))
        return { rollback: { kind: 'limited' } };
      const lease = await deps.engine.leases.takeOver(scopeKey, null, t);
      return lease ? { commit: { kind: 'resumed', lease } } : { rollback: { kind: 'moved' } };
    }
    const payment = await Payment.findByPk(paymentId, { transaction: t });
    if (!payment || payment.status === 'PROCESSING') return { rollback: { kind: 'in_flight' } };
    const reply = paymentReply(payment);
    await deps.engine.leases.finishRetryable(t, scopeKey, reply);
    return { commit: { kind: 'final', reply } };
  });
}
