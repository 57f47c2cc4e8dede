// Repairs applied by `reconcile` (payments/reconcile.ts). Every write goes through the same guards as the
// service: a payment with an idempotency record is finished only after a takeover of an ended lease
// (so a live executor is never overwritten), and money only moves through idempotent refunds.
import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Charge, GatewayClient } from '../gateway/types.js';
import { openRecords, settleByQuery } from '../idempotency/effect-recover.js';
import type { IdempotencyEngine } from '../idempotency/engine.js';
import { Order } from '../models/order.js';
import { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentEffect } from './payment-effect.js';

/** reported: left as found; repaired: fixed now; in-flight: a live executor owns it (transient);
 * failed: a repair was attempted and did not complete (the next run tries again); waiting: a
 * resumable payment younger than the operator's limit, waiting for its client (not a fault yet). */
export type RepairOutcome = 'reported' | 'repaired' | 'in-flight' | 'failed' | 'waiting';

export interface RepairResult {
  outcome: RepairOutcome;
  note: string;
}

export interface RepairDeps {
  sequelize: Sequelize;
  gateway: GatewayClient;
  /** Needed to finish a payment that has an idempotency record (its lease store). */
  engine?: IdempotencyEngine;
  logger?: Logger;
}

const IN_FLIGHT: RepairResult = {
  outcome: 'in-flight',
  note: 'in-flight, skipped: an executor holds a live lease',
};

/** True while an executor holds a live lease on the payment: reconcile then leaves it alone. */
export async function underLiveLease(sequelize: Sequelize, paymentId: string): Promise<boolean> {
  return (await openRecords({ sequelize }, paymentId)).some((r) => r.live);
}

/** PROCESSING locally, charged at the gateway: finish it as the service would have. */
export async function finaliseCharged(
  deps: RepairDeps,
  payment: Payment,
  charge: Charge,
  repair: boolean,
): Promise<RepairResult> {
  const records = await openRecords(deps, payment.id);
  // Checked in report-only runs too: a payment being charged right now is not a mismatch.
  if (records.some((r) => r.live)) return IN_FLIGHT;
  if (records.length === 0) {
    // Its executor may have finished between the read of the payments and now.
    await payment.reload();
    if (payment.status !== 'PROCESSING')
      return { outcome: 'in-flight', note: `settled meanwhile as ${payment.status}` };
    if (repair) return finaliseWithoutRecord(deps.sequelize, payment, charge);
  }
  if (!repair) return { outcome: 'reported', note: `repairable: finalise as ${charge.status}` };
  const { engine } = deps;
  if (!engine)
    return {
      outcome: 'reported',
      note: 'not repaired: the idempotency engine is needed to finish the record',
    };
  return finaliseRecords({ sequelize: deps.sequelize, engine, gateway: deps.gateway }, payment, records);
}

/**
 * Finishes the payment through its open records, with the service's own steps (take over: one
 * winner; ask the gateway; finalise under the lease: idempotency/effect-recover.ts). Never charges.
 */
async function finaliseRecords(
  deps: PaymentDeps,
  payment: Payment,
  records: Awaited<ReturnType<typeof openRecords>>,
): Promise<RepairResult> {
  const settled = await settleByQuery(paymentEffect, deps, payment, records);
  if (settled === 'finalised')
    return { outcome: 'repaired', note: `finalised as ${payment.status} through a lease takeover` };
  if (settled === 'taken')
    return { outcome: 'in-flight', note: 'in-flight, skipped: another executor took it over' };
  if (settled === 'fenced') return IN_FLIGHT;
  const why = settled === 'unknown' ? 'the gateway query was unavailable' : 'the query found no charge';
  return { outcome: 'failed', note: `not finalised: ${why}` };
}

/**
 * No record can finish this payment any more (none is PROCESSING or FAILED_RETRYABLE), so no executor
 * can write it either: finalise payment and order together, only if the payment is still PROCESSING.
 */
async function finaliseWithoutRecord(
  sequelize: Sequelize,
  payment: Payment,
  charge: Charge,
): Promise<RepairResult> {
  const succeeded = charge.status === 'SUCCEEDED';
  const changed = await sequelize.transaction(async (transaction) => {
    const [count] = await Payment.update(
      {
        status: succeeded ? 'SUCCEEDED' : 'FAILED',
        failureReason: succeeded ? null : 'DECLINED',
        chargeId: charge.chargeId,
      },
      { where: { id: payment.id, status: 'PROCESSING' }, transaction },
    );
    if (count === 1 && succeeded)
      await Order.update({ status: 'PAID' }, { where: { id: payment.orderId }, transaction });
    return count === 1;
  });
  await payment.reload();
  return changed
    ? { outcome: 'repaired', note: `finalised as ${payment.status} (no open idempotency record)` }
    : { outcome: 'in-flight', note: `skipped: the payment became ${payment.status} meanwhile` };
}

/**
 * SUCCEEDED charges to undo. Only charges that still stand count: the one kept is the charge the
 * payment records when it stands, else the first one that stands, never one already refunded (which
 * would leave a SUCCEEDED payment without money). Everything else that stands is an extra; a second
 * run finds the extras refunded and has nothing to do.
 */
export function extraCharges(payment: Payment, charges: Charge[], refunded: Set<string>): Charge[] {
  const standing = charges.filter((c) => c.status === 'SUCCEEDED' && !refunded.has(c.chargeId));
  const keep = standing.find((c) => c.chargeId === payment.chargeId) ?? standing[0];
  return standing.filter((c) => c !== keep);
}

/** A paymentNo charged more than once: refund the extras (idempotent per chargeId, so a retry is safe). */
export async function refundExtras(
  gateway: GatewayClient,
  payment: Payment,
  extras: Charge[],
  repair: boolean,
): Promise<RepairResult> {
  const ids = extras.map((c) => c.chargeId).join(', ');
  if (!repair) return { outcome: 'reported', note: `repairable: refund ${ids}` };
  const failed: string[] = [];
  for (const extra of extras) {
    try {
      await gateway.refund(payment.paymentNo, extra.chargeId);
    } catch {
      // A refund whose answer was lost may have happened: the next run sees it in the ledger or retries.
      failed.push(extra.chargeId);
    }
  }
  return failed.length === 0
    ? { outcome: 'repaired', note: `refunded ${ids}` }
    : { outcome: 'failed', note: `refund failed for ${failed.join(', ')}` };
}
