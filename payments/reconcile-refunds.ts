// Reconciliation of local refunds with the gateway's (CONTRACT section 10; `npm run reconcile`,
// payments/reconcile.ts). The gateway's ledger lists every business refund under its refundNo, so a
// refundNo refunded twice (a gateway that ignored the key) is seen there; without a ledger, each
// refund is queried (GET /refunds/{refundNo} returns one), and duplicates cannot be seen.
//
// Repairs go through the service's own steps, query first: a PROCESSING refund the gateway made is
// finalised through a takeover of its open record (idempotency/effect-recover.ts settleByQuery), or,
// when no record can finish it any more, by one conditional statement. Money never moves here: a
// refund made twice cannot be taken back by the service, so it is reported, never "repaired".
import { Op, QueryTypes, type WhereOptions } from 'sequelize';
import { canonicalAmount } from '../core/money.js';
import type { GatewayClient, LedgerRefund } from '../gateway/types.js';
import { openRecords, settleByQuery } from '../idempotency/effect-recover.js';
import { Payment } from '../models/payment.js';
import { Refund } from '../models/refund.js';
import type { PaymentDeps } from './payment-deps.js';
import type { RepairDeps, RepairResult } from './reconcile-repair.js';
import { queryRefund, refundEffect } from './refund-effect.js';

export type RefundMismatchKind =
  | 'refund-processing-but-refunded'
  | 'refund-succeeded-but-not-refunded'
  | 'refund-failed-but-refunded'
  | 'refunded-more-than-once'
  | 'refund-amount-mismatch'
  | 'refund-without-row'
  | 'refund-resumable'
  | 'refund-unverifiable';

export interface RefundEntry extends RepairResult {
  kind: RefundMismatchKind;
  refundNo: string;
  refundId: string | null;
  paymentNo: string;
  merchantId: string | null;
  localStatus: Refund['status'] | null;
  /** The gateway's refundIds for this refundNo. */
  gatewayRefundIds: string[];
  detail: string;
}

export interface RefundOptions {
  repair: boolean;
  since?: Date;
  merchantId?: string;
  resumableMaxAgeSeconds?: number;
}

const REPORT: RepairResult = { outcome: 'reported', note: 'never repaired automatically' };
const amount = (value: string) => canonicalAmount(String(value));

/** Every business refund of the ledger (a compensation has no refundNo), by refundNo. */
export function businessRefunds(refunds: LedgerRefund[]): Map<string, LedgerRefund[]> {
  const map = new Map<string, LedgerRefund[]>();
  for (const r of refunds) if (r.refundNo) map.set(r.refundNo, [...(map.get(r.refundNo) ?? []), r]);
  return map;
}

/** Local refunds against the gateway's; `ledger` undefined: the gateway has none (each one queried). */
export async function reconcileRefunds(
  deps: RepairDeps,
  opts: RefundOptions,
  ledger: LedgerRefund[] | undefined,
): Promise<{ refunds: number; entries: RefundEntry[] }> {
  const where: WhereOptions<Refund> = {};
  if (opts.merchantId) where.merchantId = opts.merchantId;
  if (opts.since) where.createdAt = { [Op.gte]: opts.since };
  // Rows before the gateway: a refund is finalised only after the gateway made it (no false alarm).
  const refunds = await Refund.findAll({ where, order: [['createdAt', 'ASC']] });
  const paymentNos = await paymentNosOf(refunds);
  const made = ledger ? businessRefunds(ledger) : await queried(deps.gateway, refunds);
  const entries: RefundEntry[] = [];
  for (const r of refunds) {
    const before = r.status;
    const add = (kind: RefundMismatchKind, found: LedgerRefund[], detail: string, result: RepairResult) =>
      entries.push({
        kind,
        refundNo: r.refundNo,
        refundId: r.id,
        paymentNo: paymentNos.get(r.paymentId) ?? '',
        merchantId: r.merchantId,
        localStatus: before,
        gatewayRefundIds: found.map((f) => f.refundId),
        detail,
        ...result,
      });
    // With a ledger, a refundNo it does not list was never made; without one, absent = query unavailable.
    const found = ledger ? (made.get(r.refundNo) ?? []) : made.get(r.refundNo);
    if (found === undefined) {
      add('refund-unverifiable', [], 'the gateway query was unavailable', {
        outcome: 'reported',
        note: 'checked again by the next run',
      });
      continue;
    }
    await checkRefund(deps, opts, r, found, add);
  }
  if (ledger && !opts.merchantId) entries.push(...(await unknownRefunds(made)));
  return { refunds: refunds.length, entries };
}

type Add = (kind: RefundMismatchKind, found: LedgerRefund[], detail: string, result: RepairResult) => void;

async function checkRefund(
  deps: RepairDeps,
  opts: RefundOptions,
  r: Refund,
  found: LedgerRefund[],
  add: Add,
) {
  const succeeded = found.filter((f) => f.status === 'SUCCEEDED');
  const wrong = found.filter((f) => f.amount !== undefined && amount(f.amount) !== amount(r.amount));
  if (r.status === 'PROCESSING' && r.resumableSince && found.length === 0) {
    // Listed, never performed here: its client was told nothing was refunded (CONTRACT section 10).
    const age = Math.floor((Date.now() - r.resumableSince.getTime()) / 1000);
    const limit = opts.resumableMaxAgeSeconds ?? 3600;
    add('refund-resumable', [], `resumable for ${age} s: a retry with its key executes it`, {
      outcome: age > limit ? 'reported' : 'waiting',
      note: age > limit ? `older than ${limit} s: its client has not come back` : '',
    });
  }
  if (wrong.length > 0)
    add(
      'refund-amount-mismatch',
      wrong,
      `refund ${amount(r.amount)}, gateway ${wrong.map((f) => f.amount)}`,
      REPORT,
    );
  if (r.status === 'PROCESSING' && found.length > 0) {
    const result =
      wrong.length > 0
        ? { outcome: 'reported' as const, note: 'not finalised: the refunded amount differs' }
        : await finaliseMade(deps, r, opts.repair);
    add('refund-processing-but-refunded', found.slice(0, 1), `gateway refund ${found[0].status}`, result);
  }
  if (r.status === 'SUCCEEDED' && succeeded.length === 0)
    add(
      'refund-succeeded-but-not-refunded',
      found,
      'SUCCEEDED locally but not refunded at the gateway',
      REPORT,
    );
  if (r.status === 'FAILED' && succeeded.length > 0)
    add('refund-failed-but-refunded', succeeded, 'FAILED locally but the gateway refunded', REPORT);
  if (succeeded.length > 1)
    add('refunded-more-than-once', succeeded, `${succeeded.length} refunds for one refundNo`, {
      outcome: 'reported',
      note: 'money went back more than once (a gateway that ignored the key): settle with the customer by hand',
    });
}

/** PROCESSING locally, made at the gateway: finish it as the service would have, query first. */
async function finaliseMade(deps: RepairDeps, r: Refund, repair: boolean): Promise<RepairResult> {
  const records = await openRecords(deps, r.id);
  if (records.some((x) => x.live))
    return { outcome: 'in-flight', note: 'in-flight, skipped: an executor holds a live lease' };
  if (!repair) return { outcome: 'reported', note: 'repairable: finalise as the gateway answers' };
  const { engine } = deps;
  if (records.length > 0) {
    if (!engine) return { outcome: 'reported', note: 'not repaired: the idempotency engine is needed' };
    const steps: PaymentDeps = { sequelize: deps.sequelize, engine, gateway: deps.gateway };
    const settled = await settleByQuery(refundEffect, steps, r, records);
    if (settled === 'finalised')
      return { outcome: 'repaired', note: `finalised as ${r.status} through a lease takeover` };
    if (settled === 'taken' || settled === 'fenced')
      return { outcome: 'in-flight', note: 'taken over meanwhile' };
    return { outcome: 'failed', note: `not finalised: the gateway query answered ${settled}` };
  }
  // No record can finish it any more (none open): ask the gateway, then one conditional statement.
  const asked = await queryRefund(deps, r);
  if (asked.kind !== 'done')
    return { outcome: 'failed', note: `not finalised: the gateway query answered ${asked.kind}` };
  const succeeded = asked.result.status === 'SUCCEEDED';
  const rows = await deps.sequelize.query<{ n: string }>(
    `WITH r AS (UPDATE refunds SET status = $2, failure_reason = $3, gateway_refund_id = $4, resumable_since = NULL,
                       updated_at = now()
                WHERE id = $1 AND status = 'PROCESSING' RETURNING payment_id, amount),
          p AS (UPDATE payments SET amount_refunded = payments.amount_refunded + r.amount, updated_at = now()
                FROM r WHERE payments.id = r.payment_id AND $5::boolean RETURNING 1)
     SELECT count(*) AS n FROM r`,
    {
      bind: [
        r.id,
        succeeded ? 'SUCCEEDED' : 'FAILED',
        succeeded ? null : 'DECLINED',
        asked.result.refundId,
        succeeded,
      ],
      type: QueryTypes.SELECT,
    },
  );
  await r.reload();
  return Number(rows[0]?.n) === 1
    ? { outcome: 'repaired', note: `finalised as ${r.status} (no open idempotency record)` }
    : { outcome: 'in-flight', note: `skipped: the refund became ${r.status} meanwhile` };
}

/** paymentNo by payment id, for the refunds' payments. */
async function paymentNosOf(refunds: Refund[]): Promise<Map<string, string>> {
  const ids = [...new Set(refunds.map((r) => r.paymentId))];
  const map = new Map<string, string>();
  for (let i = 0; i < ids.length; i += 1000) {
    const payments = await Payment.findAll({
      attributes: ['id', 'paymentNo'],
      where: { id: { [Op.in]: ids.slice(i, i + 1000) } },
    });
    for (const p of payments) map.set(p.id, p.paymentNo);
  }
  return map;
}

/** Without a ledger: each refund's one refund at the gateway (absent: unavailable). */
async function queried(gateway: GatewayClient, refunds: Refund[]) {
  const made = new Map<string, LedgerRefund[]>();
  for (let i = 0; i < refunds.length; i += 10) {
    await Promise.all(
      refunds.slice(i, i + 10).map(async (r) => {
        const q = await gateway.queryRefund(r.refundNo);
        if (q.kind === 'found') made.set(r.refundNo, [q.refund]);
        if (q.kind === 'none') made.set(r.refundNo, []);
      }),
    );
  }
  return made;
}

/** Ledger refunds whose refundNo no local refund has (looked up in the whole table). */
async function unknownRefunds(made: Map<string, LedgerRefund[]>): Promise<RefundEntry[]> {
  const nos = [...made.keys()];
  const known = new Set<string>();
  for (let i = 0; i < nos.length; i += 1000) {
    const found = await Refund.findAll({
      attributes: ['refundNo'],
      where: { refundNo: { [Op.in]: nos.slice(i, i + 1000) } },
    });
    for (const r of found) known.add(r.refundNo);
  }
  return nos
    .filter((no) => !known.has(no))
    .map((no) => {
      const found = made.get(no) ?? [];
      return {
        kind: 'refund-without-row' as const,
        refundNo: no,
        refundId: null,
        paymentNo: found[0]?.paymentNo ?? '',
        merchantId: null,
        localStatus: null,
        gatewayRefundIds: found.map((f) => f.refundId),
        detail: `${found.length} refund(s) for a refundNo unknown locally`,
        ...REPORT,
      };
    });
}
