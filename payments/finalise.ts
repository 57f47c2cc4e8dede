import { inTransaction } from '../core/database.js';
import { failpoint } from '../core/failpoints.js';
import type { Charge } from '../gateway/types.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import { Order } from '../models/order.js';
import type { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';

export type Finalised = { kind: 'final'; reply: Reply } | { kind: 'fenced' };

/**
 * Tx 2: payment, order and record move together to the charge's outcome, only while the lease is
 * ours (the record's update is conditional on our owner token). Fenced off: someone took over after
 * our lease ended; they own the outcome now and nothing is written.
 */
export async function finalisePayment(
  deps: PaymentDeps,
  lease: Lease,
  payment: Payment,
  charge: Charge,
): Promise<Finalised> {
  const succeeded = charge.status === 'SUCCEEDED';
  await failpoint('payment.tx2.before');
  const finalised = await inTransaction(
    deps.sequelize,
    async (t): Promise<{ commit: Finalised } | { rollback: Finalised }> => {
      payment.set({
        status: succeeded ? 'SUCCEEDED' : 'FAILED',
        failureReason: succeeded ? null : 'DECLINED',
        chargeId: charge.chargeId,
        resumableSince: null,
      });
      await payment.save({ transaction: t });
      if (succeeded)
        await Order.update({ status: 'PAID' }, { where: { id: payment.orderId }, transaction: t });
      const reply = paymentReply(payment);
      const owned = await deps.engine.leases.finish(t, lease, 'SUCCEEDED', reply);
      return owned ? { commit: { kind: 'final', reply } } : { rollback: { kind: 'fenced' } };
    },
  );
  await failpoint('payment.tx2.after');
  // The instance holds what Tx 2 would have written: read back what the database has.
  if (finalised.kind === 'fenced') await payment.reload();
  return finalised;
}
