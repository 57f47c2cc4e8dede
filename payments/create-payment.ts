import { ServiceUnavailable } from '../core/errors.js';
import type { Identity } from '../core/identity.js';
import type { IdempotentRequest } from '../idempotency/engine.js';
import type { Lease } from '../idempotency/lease.js';
import type { Outcome } from '../idempotency/outcome.js';
import type { StoredRecord } from '../idempotency/record-store.js';
import type { Payment } from '../models/payment.js';
import { claimPayment, type FailureReply } from './claim.js';
import { markNotCharged } from './mark-not-charged.js';
import type { CreatePaymentInput } from './payment.schema.js';
import type { PaymentDeps } from './payment-deps.js';
import { resumePayment } from './resume.js';
import { type Settlement, settlePayment } from './settle.js';
import { paymentOfRecord, takeOverPayment } from './take-over.js';

/**
 * POST /payments (Mode B): the charge cannot be rolled back, so the flow is a state machine of steps,
 * each its own transaction or call (CONTRACT sections 3 and 5, DESIGN "Mode B"):
 * claim (Tx 1: record + payment row, or what was there instead) → charge at the gateway, outside any
 * transaction → finalise (Tx 2, fenced on the owner token). A key whose attempt was abandoned is
 * taken over, or resumed when it certainly charged nothing, and then settled query-first.
 */
export async function createPayment(
  deps: PaymentDeps,
  auth: Identity,
  req: IdempotentRequest,
  input: CreatePaymentInput,
  failureReply: FailureReply,
  signal?: AbortSignal,
): Promise<Outcome> {
  // Each pass ends in an answer, or looks again after losing a race (bounded: answers 202 after 4).
  for (let pass = 0; pass < 4; pass++) {
    const claim = await claimPayment(deps, req, auth, input, failureReply);
    switch (claim.kind) {
      case 'claimed': {
        const settlement = await settlePayment(deps, claim.lease, claim.payment, 'charge');
        return answer(deps, req, 'executed', claim.lease, claim.payment, settlement, signal);
      }
      case 'refused':
        return { kind: 'failed_final', error: claim.error };
      case 'existing':
        // A new key for a merchantOrderNo that already has this payment: its answer, no second charge.
        return {
          kind: 'replayed',
          reply: { ...claim.reply, headers: { ...claim.reply.headers, 'Idempotent-Replayed': 'true' } },
        };
      case 'existing_in_flight':
        return deps.engine.inFlight(req, claim.payment.id);
      case 'limited':
        return deps.engine.limited(req);
      case 'found': {
        const continued = await continueAttempt(deps, req, claim.record, signal);
        if (continued) return continued;
        break; // another executor won the takeover: look again
      }
      case 'again':
        break;
    }
  }
  return deps.engine.inFlight(req, null);
}

/**
 * A record of this key is there. The same request whose attempt was abandoned continues it: resumed
 * when it certainly charged nothing (FAILED_RETRYABLE), taken over when its lease ended. Anything
 * else is answered as a duplicate (replay, 202, or 409 for another request). undefined: lost the
 * takeover to someone else.
 */
async function continueAttempt(
  deps: PaymentDeps,
  req: IdempotentRequest,
  record: StoredRecord,
  signal?: AbortSignal,
): Promise<Outcome | undefined> {
  const { resourceId } = record;
  if (record.requestHash !== req.requestHash || !resourceId)
    return deps.engine.answerDuplicate(req, record, signal);
  let lease: Lease | undefined;
  if (record.status === 'FAILED_RETRYABLE') lease = await resumePayment(deps, req.scopeKey);
  else if (record.status === 'PROCESSING' && record.leaseExpired) {
    lease = await takeOverPayment(deps, req.scopeKey, record.ownerToken);
  } else return deps.engine.answerDuplicate(req, record, signal);
  if (!lease) return undefined;
  const payment = await paymentOfRecord(resourceId);
  const settlement = await settlePayment(deps, lease, payment, 'query');
  return answer(deps, req, 'lease_takeover', lease, payment, settlement, signal);
}

/** What the client is told once the gateway part has run. */
async function answer(
  deps: PaymentDeps,
  req: IdempotentRequest,
  kind: 'executed' | 'lease_takeover',
  lease: Lease,
  payment: Payment,
  settlement: Settlement,
  signal?: AbortSignal,
): Promise<Outcome> {
  switch (settlement.kind) {
    case 'final':
      return { kind, reply: settlement.reply };
    case 'not_charged': {
      await markNotCharged(deps, lease);
      const error = new ServiceUnavailable(
        'Payment gateway unavailable; retry with the same Idempotency-Key',
        1,
      );
      return { kind: 'failed_retryable', error };
    }
    case 'fenced': {
      // Whoever fenced us off owns the outcome: answer from the record as it stands.
      const current = await deps.engine.current(req.scopeKey);
      return current
        ? deps.engine.answerDuplicate(req, current, signal)
        : deps.engine.inFlight(req, payment.id);
    }
    case 'pending':
      return deps.engine.inFlight(req, payment.id);
  }
}
