// Reconciliation of local payments with the gateway's records (spec rule 4.4.11: a downstream without
// idempotency needs query, reconciliation and compensation). Used by `npm run reconcile`.
//
// How every charge is seen: the contract's gateway only offers GET /charges/{paymentNo}, which returns
// ONE charge per paymentNo, so a paymentNo charged twice (a gateway that ignores the key) cannot be seen
// through it. The simulator's GET /ledger (or a real gateway's settlement report behind the same
// `ledger()` interface) lists every charge and refund, so the ledger is used whenever it answers; when
// the gateway answers that it has none, each local payment is queried instead and the report says that
// duplicate charges (and refunds) were not detectable.
import { Op, type WhereOptions } from 'sequelize';
import { canonicalAmount } from '../core/money.js';
import type { Charge } from '../gateway/types.js';
import { Payment, type PaymentStatus } from '../models/payment.js';
import { type RefundEntry, reconcileRefunds } from './reconcile-refunds.js';
import {
  extraCharges,
  finaliseCharged,
  type RepairDeps,
  type RepairOutcome,
  type RepairResult,
  refundExtras,
  underLiveLease,
} from './reconcile-repair.js';
import { type GatewayView, ledgerView, QUERY_NOTICE, queryView } from './reconcile-view.js';

export type MismatchKind =
  | 'processing-but-charged'
  | 'succeeded-but-not-charged'
  | 'failed-but-charged'
  | 'charged-more-than-once'
  | 'amount-mismatch'
  | 'charge-without-payment'
  | 'resumable'
  | 'unverifiable';

export interface ReconcileEntry {
  kind: MismatchKind;
  paymentNo: string;
  paymentId: string | null;
  merchantId: string | null;
  /** The local status when the run looked at it. */
  localStatus: PaymentStatus | null;
  chargeIds: string[];
  detail: string;
  outcome: RepairOutcome;
  note: string;
}

export interface ReconcileReport {
  source: 'ledger' | 'query';
  duplicatesDetectable: boolean;
  notice: string | null;
  repair: boolean;
  /** Local payments checked, and the gateway charges found for them. */
  payments: number;
  charges: number;
  entries: ReconcileEntry[];
  /** Local refunds checked, and their mismatches (payments/reconcile-refunds.ts). */
  refunds: number;
  refundEntries: RefundEntry[];
  /** Entries still wrong after this run (reported or failed); in-flight ones are transient. */
  unresolved: number;
}

export type ReconcileDeps = RepairDeps;

/** The CLI's exit code for a report: 1 while any mismatch stays unrepaired (in-flight ones are transient). */
export const exitCodeFor = (report: ReconcileReport): 0 | 1 => (report.unresolved === 0 ? 0 : 1);

export interface ReconcileOptions {
  repair: boolean;
  /** Only payments created at or after this instant. */
  since?: Date;
  /** Only this merchant's payments; charges of unknown paymentNos cannot be attributed and are skipped. */
  merchantId?: string;
  /**
   * A resumable payment (its last attempt certainly charged nothing, waiting for its client to ask
   * again) older than this many seconds counts as unresolved: the exit code says so. Default 3600.
   */
  resumableMaxAgeSeconds?: number;
}

export async function reconcile(deps: ReconcileDeps, opts: ReconcileOptions): Promise<ReconcileReport> {
  // Payments before the gateway: a payment is finalised only after its charge was made, so a payment
  // read as SUCCEEDED has its charge in the ledger taken afterwards (no false "succeeded but not
  // charged"); charges of payments created meanwhile are looked up again below (no false "unknown").
  const where: WhereOptions<Payment> = {};
  if (opts.merchantId) where.merchantId = opts.merchantId;
  if (opts.since) where.createdAt = { [Op.gte]: opts.since };
  const payments = await Payment.findAll({ where, order: [['createdAt', 'ASC']] });
  const view = (await ledgerView(deps.gateway)) ?? (await queryView(deps.gateway, payments));
  const entries: ReconcileEntry[] = [];
  for (const p of payments) {
    const before = p.status;
    const add: Add = (kind, charges, detail, r) => {
      const entry: ReconcileEntry = {
        kind,
        paymentNo: p.paymentNo,
        paymentId: p.id,
        merchantId: p.merchantId,
        localStatus: before,
        chargeIds: charges.map((c) => c.chargeId),
        detail,
        ...r,
      };
      entries.push(entry);
      if (kind === 'succeeded-but-not-charged')
        deps.logger?.error(entry, 'SUCCEEDED payment without a charge');
    };
    if (view.unverifiable.has(p.paymentNo))
      add('unverifiable', [], 'the gateway query was unavailable', {
        outcome: 'reported',
        note: 'checked again by the next run',
      });
    else await checkPayment(deps, opts, view, p, add);
  }
  if (view.source === 'ledger' && !opts.merchantId) await addUnknownCharges(view, payments, entries);
  const refunds = await reconcileRefunds(deps, opts, view.refunds);
  const unresolved = [...entries, ...refunds.entries].filter(
    (e) => e.outcome === 'reported' || e.outcome === 'failed',
  ).length;
  return {
    source: view.source,
    duplicatesDetectable: view.source === 'ledger',
    notice: view.source === 'query' ? QUERY_NOTICE : null,
    repair: opts.repair,
    payments: payments.length,
    charges: payments.reduce((n, p) => n + (view.charges.get(p.paymentNo)?.length ?? 0), 0),
    entries,
    refunds: refunds.refunds,
    refundEntries: refunds.entries,
    unresolved,
  };
}

/** Amounts compare as canonical strings ("25", "25.5" and "25.50" are one amount), never as floats. */
const amount = (value: string) => canonicalAmount(String(value));

type Add = (kind: MismatchKind, charges: Charge[], detail: string, r: RepairResult) => void;

async function checkPayment(
  deps: ReconcileDeps,
  opts: ReconcileOptions,
  view: GatewayView,
  p: Payment,
  add: Add,
) {
  const charges = view.charges.get(p.paymentNo) ?? [];
  const live = charges.filter((c) => c.status === 'SUCCEEDED' && !view.refunded.has(c.chargeId));
  const wrongAmount = charges.filter(
    (c) =>
      !view.refunded.has(c.chargeId) && (amount(c.amount) !== amount(p.amount) || c.currency !== p.currency),
  );
  const report: RepairResult = { outcome: 'reported', note: 'never repaired automatically' };
  if (p.status === 'PROCESSING' && p.resumableSince && live.length === 0) {
    // Listed, never charged here: its client was told nothing was charged (CONTRACT section 3).
    const ageSeconds = Math.floor((Date.now() - p.resumableSince.getTime()) / 1000);
    const limit = opts.resumableMaxAgeSeconds ?? 3600;
    add('resumable', [], `resumable for ${ageSeconds} s: the next POST /payments for its order executes it`, {
      outcome: ageSeconds > limit ? 'reported' : 'waiting',
      note: ageSeconds > limit ? `older than ${limit} s: its client has not come back` : '',
    });
  }
  if (wrongAmount.length > 0) {
    const seen = wrongAmount.map((c) => `${c.amount} ${c.currency}`).join(', ');
    add('amount-mismatch', wrongAmount, `payment ${amount(p.amount)} ${p.currency}, charged ${seen}`, report);
  }
  if (p.status === 'PROCESSING' && charges.length > 0) {
    // What the service itself would settle on: the charge its query returns (the first one).
    const charge = charges[0];
    const result =
      wrongAmount.length > 0
        ? { outcome: 'reported' as const, note: 'not finalised: the charged amount differs' }
        : await finaliseCharged(deps, p, charge, opts.repair);
    add('processing-but-charged', [charge], `gateway charge ${charge.status}`, result);
  }
  if (p.status === 'SUCCEEDED' && live.length === 0) {
    const why = charges.length === 0 ? 'no charge at the gateway' : 'its charges were declined or refunded';
    add('succeeded-but-not-charged', charges, `SUCCEEDED locally but ${why}`, report);
  }
  if (p.status === 'FAILED' && live.length > 0)
    add('failed-but-charged', live, 'FAILED locally but a charge stands', report);
  // After any finalisation above, so that the charge just recorded is the one kept. Never while an
  // executor holds a live lease: it may be about to record a charge this run would call an extra.
  const extras = extraCharges(p, charges, view.refunded);
  if (extras.length > 0 && (await underLiveLease(deps.sequelize, p.id))) {
    add('charged-more-than-once', extras, `${charges.length} charges for one paymentNo`, {
      outcome: 'in-flight',
      note: 'in-flight, skipped: an executor holds a live lease',
    });
  } else if (extras.length > 0) {
    const result = await refundExtras(deps.gateway, p, extras, opts.repair);
    add('charged-more-than-once', extras, `${charges.length} charges for one paymentNo`, result);
  }
}

/** Ledger charges whose paymentNo no local payment has (looked up beyond `since`, in the whole table). */
async function addUnknownCharges(view: GatewayView, payments: Payment[], entries: ReconcileEntry[]) {
  const known = new Set(payments.map((p) => p.paymentNo));
  const others = [...view.charges.keys()].filter((no) => !known.has(no));
  for (let i = 0; i < others.length; i += 1000) {
    const chunk = others.slice(i, i + 1000);
    const found = await Payment.findAll({
      attributes: ['paymentNo'],
      where: { paymentNo: { [Op.in]: chunk } },
    });
    for (const p of found) known.add(p.paymentNo);
  }
  for (const no of others.filter((n) => !known.has(n))) {
    const charges = view.charges.get(no) ?? [];
    entries.push({
      kind: 'charge-without-payment',
      paymentNo: no,
      paymentId: null,
      merchantId: null,
      localStatus: null,
      chargeIds: charges.map((c) => c.chargeId),
      detail: `${charges.length} charge(s) for a paymentNo unknown locally`,
      outcome: 'reported',
      note: 'never repaired automatically',
    });
  }
}
