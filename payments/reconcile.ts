// `npm run reconcile`: local payments and refunds against the gateway's records, by the mechanism of
// idempotency/effect-reconcile.ts. Here is what is the payment's: its rows, the gateway's charges, how
// an extra charge is undone (a refund of that whole charge, idempotent per chargeId), and the report.
//
// Every charge is seen only in the simulator's GET /ledger (or a real gateway's settlement report
// behind the same `ledger()`): GET /charges/{paymentNo} returns ONE charge, so a paymentNo charged
// twice cannot be seen through it. Without a ledger each payment is queried instead.
import type { Logger } from 'pino';
import { canonicalAmount } from '../core/money.js';
import { ledgerIfOffered } from '../gateway/client.js';
import { reconcileEffect } from '../idempotency/effect-reconcile.js';
import {
  defineReconciler,
  inScope,
  type Mismatch,
  type ReconcileOptions,
} from '../idempotency/effect-reconciler.js';
import { Payment } from '../models/payment.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentEffect } from './payment-effect.js';
import { refundReconciler } from './reconcile-refunds.js';

export { exitCodeFor } from '../idempotency/effect-reconciler.js';
export type ReconcileDeps = PaymentDeps & { logger?: Logger };
export type ReconcileReport = Awaited<ReturnType<typeof reconcile>>;

const KINDS = {
  'processing-but-done': 'processing-but-charged',
  'succeeded-but-not-done': 'succeeded-but-not-charged',
  'failed-but-done': 'failed-but-charged',
  'done-more-than-once': 'charged-more-than-once',
  'amount-mismatch': 'amount-mismatch',
  'done-without-row': 'charge-without-payment',
  resumable: 'resumable',
  unverifiable: 'unverifiable',
} as const satisfies Record<Mismatch, string>;

const paymentReconciler = defineReconciler({
  effect: paymentEffect,
  words: {
    ...{ row: 'payment', noun: 'charge', key: 'paymentNo', done: 'charged', by: 'gateway' },
    resume: 'the next POST /payments for its order executes it',
    notDone: (found) =>
      found.length === 0 ? 'no charge at the gateway' : 'its charges were declined or refunded',
    stands: 'a charge stands',
  },
  keyColumn: 'payment_no',
  key: (p) => p.paymentNo,
  keyOf: (c) => c.paymentNo,
  list: (scope) => Payment.findAll(inScope(scope)),
  listing: async (deps) => {
    const ledger = await ledgerIfOffered(deps.gateway);
    // Only compensations (refunds without refundNo) undo a charge: a business refund returns part or
    // all of a charge that stands, and is reconciled against the refunds table (reconcile-refunds.ts).
    const undone = new Set(ledger?.refunds.filter((r) => !r.refundNo).map((r) => r.chargeId));
    return ledger && { entries: ledger.charges, undone: (c) => undone.has(c.chargeId) };
  },
  differs: (p, c) => canonicalAmount(c.amount) !== canonicalAmount(p.amount) || c.currency !== p.currency,
  mismatch: (p, wrong) =>
    `payment ${canonicalAmount(p.amount)} ${p.currency}, charged ${wrong.map((c) => `${c.amount} ${c.currency}`).join(', ')}`,
  id: (c) => c.chargeId,
  alone: {
    column: 'charge_id',
    returning: 'order_id',
    also: `UPDATE orders SET status = 'PAID', updated_at = now() FROM r WHERE orders.id = r.order_id`,
  },
  duplicates: {
    verb: 'refund',
    keeps: (p, c) => c.chargeId === p.chargeId,
    undo: (deps, p, c) => deps.gateway.refund(p.paymentNo, c.chargeId),
  },
  entry: ({ kind, key, row, localStatus, found, ...rest }) => ({
    kind: KINDS[kind],
    paymentNo: key,
    paymentId: row?.id ?? null,
    merchantId: row?.merchantId ?? null,
    localStatus,
    chargeIds: found.map((c) => c.chargeId),
    ...rest,
  }),
});

export async function reconcile(deps: ReconcileDeps, opts: ReconcileOptions) {
  const payments = await reconcileEffect(paymentReconciler, deps, opts);
  const refunds = await reconcileEffect(refundReconciler, deps, opts);
  for (const e of payments.entries)
    if (e.kind === 'succeeded-but-not-charged') deps.logger?.error(e, 'SUCCEEDED payment without a charge');
  return {
    source: payments.source,
    duplicatesDetectable: payments.source === 'ledger',
    notice:
      payments.source === 'query'
        ? 'the gateway has no ledger: each payment was queried (GET /charges/{paymentNo} returns one charge), ' +
          'so duplicate charges and refunds could not be detected'
        : null,
    repair: opts.repair,
    payments: payments.rows,
    charges: payments.found,
    entries: payments.entries,
    refunds: refunds.rows,
    refundEntries: refunds.entries,
    unresolved: payments.unresolved + refunds.unresolved,
  };
}
