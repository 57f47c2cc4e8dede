// The simulator's POST /refunds (both forms) and GET /refunds/{refundNo} (CONTRACT.md section 9).
import type http from 'node:http';
import { deliver, HttpError, hit, newId, parse, send, serverError } from './simulator-http.js';
import type { BusinessRefund, Charge, Faults, Ledger, Refund, RefundRequest } from './types.js';
import { businessRefundRequestSchema, refundRequestSchema } from './wire.js';

type Sleep = (ms: number) => Promise<void>;

/** Canonical amounts ("12.30") as integer cents, so that no float ever adds money up. */
const cents = (amount: string) => BigInt(amount.replace('.', ''));

/**
 * A body meant as a business refund: one with any of its fields, or sent with an Idempotency-Key.
 * Such a body without a valid refundNo is a 400, never read as the compensation form, which would
 * undo the whole charge when the caller asked for part of it.
 */
function isBusiness(req: http.IncomingMessage, body: unknown): boolean {
  if (req.headers['idempotency-key'] !== undefined) return true;
  if (typeof body !== 'object' || body === null) return false;
  return ['refundNo', 'amount', 'currency'].some((field) => field in body);
}

/** A replay must ask for the refund the key was first used for. */
const sameRefund = (a: RefundRequest, b: RefundRequest) =>
  a.paymentNo === b.paymentNo &&
  a.chargeId === b.chargeId &&
  a.amount === b.amount &&
  a.currency === b.currency;

export function createRefundDesk(ledger: Ledger) {
  const firstRefund = new Map<string, BusinessRefund>();
  const compensationByChargeId = new Map<string, Refund>();

  // Indexes over the ledger's append-only lists (a charge or refund is never changed once pushed), so
  // that a refund costs the same with 100 charges recorded as with 100,000: the charges by
  // (paymentNo, chargeId), indexed up to where the list has grown since, and the SUCCEEDED business
  // refunds' sum per charge, kept as this desk pushes them.
  const chargeByKey = new Map<string, Charge>();
  let chargesIndexed = 0;
  const refundedCents = new Map<string, bigint>();
  const chargeKey = (paymentNo: string, chargeId: string) => `${paymentNo}\u0000${chargeId}`;

  /** The first charge recorded with this paymentNo and chargeId, as a scan of the list would find it. */
  function findCharge(paymentNo: string, chargeId: string): Charge | undefined {
    for (; chargesIndexed < ledger.charges.length; chargesIndexed++) {
      const c = ledger.charges[chargesIndexed];
      const key = chargeKey(c.paymentNo, c.chargeId);
      if (!chargeByKey.has(key)) chargeByKey.set(key, c);
    }
    return chargeByKey.get(chargeKey(paymentNo, chargeId));
  }

  /** What is left to refund of a charge: its amount minus its SUCCEEDED refunds; none once compensated. */
  function leftOf(charge: Charge): bigint {
    if (charge.status !== 'SUCCEEDED' || compensationByChargeId.has(charge.chargeId)) return 0n;
    return cents(charge.amount) - (refundedCents.get(charge.chargeId) ?? 0n);
  }

  async function postBusiness(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: unknown,
    f: Faults,
    sleep: Sleep,
  ) {
    const input = parse(businessRefundRequestSchema, body);
    if (req.headers['idempotency-key'] !== input.refundNo)
      throw new HttpError(400, 'Idempotency-Key header must equal refundNo');
    let refund = f.ignoreIdempotencyKey ? undefined : firstRefund.get(input.refundNo);
    if (refund && !sameRefund(refund, input))
      throw new HttpError(409, 'Idempotency-Key reused with a different charge, amount or currency');
    if (!refund) {
      // Nothing is recorded for a refund that names no charge: a DECLINED record would claim that a
      // charge exists, and a later GET /refunds/{refundNo} would answer for a refund of nothing.
      const charge = findCharge(input.paymentNo, input.chargeId);
      if (!charge) throw new HttpError(404, 'no such charge for this paymentNo');
      if (charge.currency !== input.currency) throw new HttpError(409, "currency differs from the charge's");
      if (hit(f.errorRate)) return serverError(res, f, sleep, 'refunded');
      // The cap holds even when keys are ignored: a gateway never pays back more than it took. No
      // await between this check and the push: concurrent refunds of one charge cannot both pass it.
      const over = cents(input.amount) > leftOf(charge);
      refund = {
        ...input,
        refundId: newId('re'),
        status: over || hit(f.declineRate) ? 'DECLINED' : 'SUCCEEDED',
      };
      ledger.refunds.push(refund);
      if (refund.status === 'SUCCEEDED')
        refundedCents.set(charge.chargeId, (refundedCents.get(charge.chargeId) ?? 0n) + cents(input.amount));
      if (!firstRefund.has(input.refundNo)) firstRefund.set(input.refundNo, refund);
    }
    return deliver(req, res, f, sleep, refund);
  }

  /** The compensation form, unchanged: idempotent per chargeId, no faults applied. */
  function postCompensation(res: http.ServerResponse, body: unknown) {
    const { paymentNo, chargeId } = parse(refundRequestSchema, body);
    const charge = findCharge(paymentNo, chargeId);
    if (!charge) throw new HttpError(404, 'no such charge');
    if (charge.status === 'DECLINED') throw new HttpError(409, 'a declined charge has nothing to refund');
    let refund = compensationByChargeId.get(chargeId);
    if (!refund) {
      refund = { paymentNo, chargeId, refundId: newId('re') };
      ledger.refunds.push(refund);
      compensationByChargeId.set(chargeId, refund);
    }
    send(res, 200, refund);
  }

  return {
    post(req: http.IncomingMessage, res: http.ServerResponse, body: unknown, f: Faults, sleep: Sleep) {
      return isBusiness(req, body) ? postBusiness(req, res, body, f, sleep) : postCompensation(res, body);
    },
    /** The first refund made under a refundNo (a replay answers it too), or undefined. */
    get: (refundNo: string) => firstRefund.get(refundNo),
  };
}
