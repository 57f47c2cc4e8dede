// Reconciliation of local refunds with the gateway's (CONTRACT section 10; `npm run reconcile`,
// payments/reconcile.ts), by the mechanism of idempotency/effect-reconcile.ts. The ledger lists every
// business refund under its refundNo, so a refundNo refunded twice (a gateway that ignored the key) is
// seen there; without a ledger each refund is queried (GET /refunds/{refundNo} returns one).
//
// Money never moves here: a refund made twice cannot be taken back by the service, so it is reported,
// never "repaired". `--repair` only finalises a PROCESSING refund the gateway made, query first.
import { canonicalAmount } from '../core/money.js';
import { ledgerIfOffered } from '../gateway/client.js';
import type { LedgerRefund } from '../gateway/types.js';
import { defineReconciler, inScope, type Mismatch } from '../idempotency/effect-reconciler.js';
import { Payment } from '../models/payment.js';
import { Refund } from '../models/refund.js';
import { refundEffect } from './refund-effect.js';

export type RefundEntry = Awaited<ReturnType<typeof refundReconciler.entry>>;

const KINDS = {
  'processing-but-done': 'refund-processing-but-refunded',
  'succeeded-but-not-done': 'refund-succeeded-but-not-refunded',
  'failed-but-done': 'refund-failed-but-refunded',
  'done-more-than-once': 'refunded-more-than-once',
  'amount-mismatch': 'refund-amount-mismatch',
  'done-without-row': 'refund-without-row',
  resumable: 'refund-resumable',
  unverifiable: 'refund-unverifiable',
} as const satisfies Record<Mismatch, string>;

const amount = (value: string | undefined) => (value === undefined ? undefined : canonicalAmount(value));

export const refundReconciler = defineReconciler({
  effect: refundEffect,
  words: {
    ...{ row: 'refund', noun: 'refund', key: 'refundNo', done: 'refunded', by: 'gateway' },
    resume: 'a retry with its key executes it; the recoverer closes it (KEY_EXPIRED) once the key expires',
    notDone: () => 'not refunded at the gateway',
    stands: 'the gateway refunded',
  },
  keyColumn: 'refund_no',
  key: (r) => r.refundNo,
  keyOf: (f: LedgerRefund) => f.refundNo ?? '',
  list: (scope) => Refund.findAll(inScope(scope)),
  // Business refunds only: a refund without refundNo is a compensation that undoes a charge.
  listing: async (deps) => {
    const ledger = await ledgerIfOffered(deps.gateway);
    return ledger && { entries: ledger.refunds.filter((r) => r.refundNo) };
  },
  differs: (r, f) => f.amount !== undefined && amount(f.amount) !== amount(r.amount),
  mismatch: (r, wrong) => `refund ${amount(r.amount)}, gateway ${wrong.map((f) => f.amount)}`,
  id: (f) => f.refundId,
  alone: {
    column: 'gateway_refund_id',
    returning: 'payment_id, amount',
    also: `UPDATE payments SET amount_refunded = payments.amount_refunded + r.amount, updated_at = now()
           FROM r WHERE payments.id = r.payment_id`,
  },
  duplicates: {
    note: 'money went back more than once (a gateway that ignored the key): settle with the customer by hand',
  },
  entry: async ({ kind, key, row, localStatus, found, ...rest }) => ({
    kind: KINDS[kind],
    refundNo: key,
    refundId: row?.id ?? null,
    paymentNo: row
      ? ((await Payment.findByPk(row.paymentId, { attributes: ['paymentNo'] }))?.paymentNo ?? '')
      : (found[0]?.paymentNo ?? ''),
    merchantId: row?.merchantId ?? null,
    localStatus,
    gatewayRefundIds: found.map((f) => f.refundId),
    ...rest,
  }),
});
