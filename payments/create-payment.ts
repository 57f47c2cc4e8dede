import { ServiceUnavailable } from '../core/errors.js';
import { failpoint } from '../core/failpoints.js';
import type { Identity } from '../core/identity.js';
import { type Cancellation, type IdempotentRequest, sameRequest } from '../idempotency/engine.js';
import type { Lease } from '../idempotency/lease.js';
import type { Outcome, Reply } from '../idempotency/outcome.js';
import type { StoredRecord } from '../idempotency/record-store.js';
import { Payment } from '../models/payment.js';
import { claimPayment, type FailureReply } from './claim.js';
import { markNotCharged } from './mark-not-charged.js';
import type { CreatePaymentInput } from './payment.schema.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';
import { resumePayment } from './resume.js';
import { type Settlement, settlePayment } from './settle.js';
import { paymentOfRecord, takeOverPayment } from './take-over.js';

/**
 * POST /payments (Mode B): the charge cannot be rolled back, so the flow is a state machine of steps,
 * each its own transaction or call (CONTRACT sections 3 and 5, DESIGN "Mode B"):
 * claim (Tx 1: record + payment row, or what was there instead) → charge at the gateway, outside any
 * transaction → finalise (Tx 2, fenced on the owner token). A key whose attempt was abandoned is
 * taken over, or resumed when it certainly charged nothing (by any request for its order, with its
 * own key or a new one: CONTRACT section 3), and then settled query-first.
 */
export async function createPayment(
  deps: PaymentDeps,
  auth: Identity,
  request: IdempotentRequest,
  input: CreatePaymentInput,
  failureReply: FailureReply,
  signal?: Cancellation,
): Promise<Outcome> {
  // A stored answer that cannot be read is rebuilt from the payment row (CONTRACT section 5).
  const req: IdempotentRequest = { ...request, rebuild: rebuildAnswer };
  // Each pass ends in an answer, or looks again after losing a race (bounded: answers 202 after 4).
  for (let pass = 0; pass < 4; pass++) {
    const claim = await claimPayment(deps, req, auth, input, failureReply);
    switch (claim.kind) {
      case 'claimed': {
        await failpoint('payment.tx1.after-commit');
        const settlement = await settlePayment(deps, claim.lease, claim.payment, 'charge');
        return answer(deps, req, 'executed', claim.lease, claim.payment, settlement, signal);
      }
      case 'resumed': {
        // Answered as a first execution would be (CONTRACT section 3); the gateway is asked first.
        const settlement = await settlePayment(deps, claim.lease, claim.payment, 'resume');
        return answer(deps, req, 'executed', claim.lease, claim.payment, settlement, signal);
      }
      case 'refused':
        return { kind: 'failed_final', error: claim.error };
      case 'existing':
        // A new key for a merchantOrderNo that already has this payment: its answer, no second charge.
        return replayed(claim.reply);
      case 'existing_in_flight':
        return deps.engine.inFlight(req, claim.payment.id);
      case 'key_in_flight':
        return deps.engine.inFlight(req, null);
      case 'limited':
        return deps.engine.limited(claim.cap);
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
  signal?: Cancellation,
): Promise<Outcome | undefined> {
  const { resourceId } = record;
  if (!sameRequest(req, record) || !resourceId) return deps.engine.answerDuplicate(req, record, signal);
  let lease: Lease | undefined;
  let first: 'query' | 'resume' = 'query';
  if (record.status === 'FAILED_RETRYABLE') {
    const resumption = await resumePayment(deps, req, resourceId);
    if (resumption.kind === 'limited') return deps.engine.limited('in-flight');
    if (resumption.kind === 'final') return replayed(resumption.reply);
    if (resumption.kind === 'in_flight') return deps.engine.inFlight(req, resourceId);
    if (resumption.kind === 'moved') return undefined;
    lease = resumption.lease;
    first = 'resume';
    await failpoint('payment.resume');
  } else if (record.status === 'PROCESSING' && record.leaseExpired) {
    lease = await takeOverPayment(deps, req.scopeKey, record.ownerToken);
    if (lease) await failpoint('payment.takeover');
  } else return deps.engine.answerDuplicate(req, record, signal);
  if (!lease) return undefined;
  const payment = await paymentOfRecord(resourceId);
  const settlement = await settlePayment(deps, lease, payment, first);
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
  signal?: Cancellation,
): Promise<Outcome> {
  switch (settlement.kind) {
    case 'final':
      return { kind, reply: settlement.reply };
    case 'not_charged': {
      // Fenced off meanwhile: whoever took over owns the outcome, answer from the record.
      if (!(await markNotCharged(deps, lease, payment))) return answerFromRecord(deps, req, payment, signal);
      const error = new ServiceUnavailable(
        'Payment gateway unavailable; retry with the same Idempotency-Key',
        1,
      );
      return { kind: 'failed_retryable', error };
    }
    case 'fenced':
      return answerFromRecord(deps, req, payment, signal);
    case 'pending':
      return deps.engine.inFlight(req, payment.id, settlement.retryAfterMs);
  }
}

/** Whoever fenced us off owns the outcome: answer from the record as it stands. */
async function answerFromRecord(
  deps: PaymentDeps,
  req: IdempotentRequest,
  payment: Payment,
  signal?: Cancellation,
): Promise<Outcome> {
  const current = await deps.engine.current(req.scopeKey);
  return current ? deps.engine.answerDuplicate(req, current, signal) : deps.engine.inFlight(req, payment.id);
}

/** The answer of a payment as its row tells it: final → 201; still PROCESSING → none (202 follows). */
async function rebuildAnswer(paymentId: string): Promise<Reply | undefined> {
  const payment = await Payment.findByPk(paymentId);
  return payment && payment.status !== 'PROCESSING' ? paymentReply(payment) : undefined;
}

/** An answer given before, to this key or another: marked as a replay. */
function replayed(reply: Reply): Outcome {
  return {
    kind: 'replayed',
    reply: { ...reply, headers: { ...reply.headers, 'Idempotent-Replayed': 'true' } },
  };
}
