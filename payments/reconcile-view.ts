// The gateway's side of a reconciliation (payments/reconcile.ts): every charge and refund it knows of,
// grouped by paymentNo. See reconcile.ts for why the ledger is preferred over per-payment queries.

import { GatewayError } from '../gateway/client.js';
import type { Charge, GatewayClient, LedgerRefund } from '../gateway/types.js';
import type { Payment } from '../models/payment.js';

export interface GatewayView {
  source: 'ledger' | 'query';
  charges: Map<string, Charge[]>;
  /** Charges undone by a compensation (a refund without refundNo): not standing any more. */
  refunded: Set<string>;
  unverifiable: Set<string>;
  /** The ledger's refunds (business refunds have a refundNo); absent without a ledger. */
  refunds?: LedgerRefund[];
}

export const QUERY_NOTICE =
  'the gateway has no ledger: each payment was queried (GET /charges/{paymentNo} returns one charge), ' +
  'so duplicate charges and refunds could not be detected';

function group(charges: Charge[]): Map<string, Charge[]> {
  const map = new Map<string, Charge[]>();
  for (const c of charges) map.set(c.paymentNo, [...(map.get(c.paymentNo) ?? []), c]);
  return map;
}

export async function ledgerView(gateway: GatewayClient): Promise<GatewayView | undefined> {
  try {
    const ledger = await gateway.ledger();
    return {
      source: 'ledger',
      charges: group(ledger.charges),
      // Only compensations undo a charge: a business refund (with its refundNo) returns part or all of
      // a charge that stands, and is reconciled against the refunds table (reconcile-refunds.ts).
      refunded: new Set(ledger.refunds.filter((r) => !r.refundNo).map((r) => r.chargeId)),
      unverifiable: new Set(),
      refunds: ledger.refunds,
    };
  } catch (err) {
    // The gateway answered but offers no ledger (4xx): fall back to queries. No answer at all (refused,
    // time-out): nothing can be verified, so the run fails rather than report every payment.
    if (err instanceof GatewayError && err.status !== undefined && err.status < 500) return undefined;
    throw err;
  }
}

export async function queryView(gateway: GatewayClient, payments: Payment[]): Promise<GatewayView> {
  const view: GatewayView = {
    source: 'query',
    charges: new Map(),
    refunded: new Set(),
    unverifiable: new Set(),
  };
  for (let i = 0; i < payments.length; i += 10) {
    await Promise.all(
      payments.slice(i, i + 10).map(async (p) => {
        const q = await gateway.query(p.paymentNo);
        if (q.kind === 'found') view.charges.set(p.paymentNo, [q.charge]);
        if (q.kind === 'unavailable') view.unverifiable.add(p.paymentNo);
      }),
    );
  }
  return view;
}
