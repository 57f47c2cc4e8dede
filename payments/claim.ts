import { isLockNotAvailable, uniqueViolation } from '../core/db-errors.js';
import type { DomainError } from '../core/errors.js';
import { failpoint } from '../core/failpoints.js';
import type { Identity } from '../core/identity.js';
import type { Cap } from '../idempotency/caps.js';
import type { IdempotentRequest } from '../idempotency/engine.js';
import { inFoldedTransaction } from '../idempotency/folded-transaction.js';
import type { Lease } from '../idempotency/lease.js';
import type { Reply } from '../idempotency/outcome.js';
import type { StoredRecord } from '../idempotency/record-store.js';
import { Payment } from '../models/payment.js';
import type { CreatePaymentInput } from './payment.schema.js';
import type { PaymentDeps } from './payment-deps.js';
import { paymentReply } from './payment-reply.js';
import { type LookupRow, paymentLookupStatement, preparePayment } from './prepare.js';
import { takeResume } from './resume.js';

export type Claim =
  /** Tx 1 committed our PROCESSING record (with its lease) and the new payment row. */
  | { kind: 'claimed'; lease: Lease; payment: Payment }
  /** The checks refused the payment: Tx 1 committed the record as FAILED_FINAL with this error. */
  | { kind: 'refused'; error: DomainError }
  /** A new key for a payment that is final already: Tx 1 committed the record with its answer. */
  | { kind: 'existing'; reply: Reply }
  /**
   * A request with a new key for a resumable payment: Tx 1
   * took the resumable mark with our record, and the payment is executed again, query first.
   */
  | { kind: 'resumed'; lease: Lease; payment: Payment }
  /** A new key for a payment still in flight: nothing was kept. */
  | { kind: 'existing_in_flight'; payment: Payment }
  /** A record of this key was there instead. */
  | { kind: 'found'; record: StoredRecord }
  /** The same key's record is being inserted by a transaction still open (a duplicate in flight, or
   * a stalled instance): our bounded wait for it ended. */
  | { kind: 'key_in_flight' }
  /** No record inserted and none there: a per-user cap refused it. */
  | { kind: 'limited'; cap: Cap }
  /** A concurrent request created the payment first: claim again. */
  | { kind: 'again' };

/** The reply a refusal is stored as (the error table of routers/, handed down by the caller). */
export type FailureReply = (error: DomainError) => Reply;

/**
 * Tx 1 of POST /payments: the PROCESSING record with a fresh lease, then the checks and the payment
 * row, committed together; or what was found instead of inserting.
 */
export async function claimPayment(
  deps: PaymentDeps,
  req: IdempotentRequest,
  auth: Identity,
  input: CreatePaymentInput,
  failureReply: FailureReply,
): Promise<Claim> {
  const { leases } = deps.engine;
  let claim: Claim | undefined;
  let refusedBy: Cap | null = null;
  await deps.engine.slotRows.ensure(req.userScope);
  try {
    // BEGIN rides with the lease claim, COMMIT with the record's link to a new payment.
    claim = await inFoldedTransaction<Claim | undefined>(deps.sequelize, async (t) => {
      let claimed: Awaited<ReturnType<typeof leases.claim>>;
      try {
        // The order lookup rides with the claim: one round trip for both.
        claimed = await leases.claim(t, req, paymentLookupStatement(auth, input));
      } catch (err) {
        // lock_timeout on our own key's uncommitted record: its request is in flight (202).
        if (isLockNotAvailable(err)) return { rollback: { kind: 'key_in_flight' } };
        throw err;
      }
      if (!('lease' in claimed)) {
        refusedBy = claimed.cap;
        return { rollback: undefined };
      }
      const { lease } = claimed;
      const prepared = preparePayment(claimed.alongside[0] as LookupRow | undefined, auth, input);
      if (prepared.kind === 'refused') {
        await leases.finish(t, lease, 'FAILED_FINAL', failureReply(prepared.error));
        return { commit: { kind: 'refused', error: prepared.error } };
      }
      if (prepared.kind === 'existing') {
        const { payment } = prepared;
        if (payment.status === 'PROCESSING') {
          // Its last attempt charged nothing and nobody is at it: this request resumes it (one winner).
          if (payment.resumableSince && (await takeResume(t, payment.id))) {
            await leases.attachResource(t, lease, payment.id);
            return { commit: { kind: 'resumed', lease, payment } };
          }
          // Its executor is still at work: our record must not stay behind (it would hold the cap).
          return { rollback: { kind: 'existing_in_flight', payment } };
        }
        const reply = paymentReply(payment);
        await leases.attachResource(t, lease, payment.id);
        await leases.finish(t, lease, 'SUCCEEDED', reply);
        return { commit: { kind: 'existing', reply } };
      }
      await failpoint('payment.tx1.before-commit');
      // The payment row, the record's link to it and COMMIT: Tx 1's last round trip.
      return {
        commitWith: `${Payment.insertStatement(prepared.payment)}\n${leases.attachResourceStatement(lease, prepared.payment.id)}`,
        value: { kind: 'claimed', lease, payment: prepared.payment },
      };
    });
  } catch (err) {
    // Lost the race on (merchant_id, merchant_order_no): evaluate again against the winner's payment.
    if (uniqueViolation(err) !== undefined) return { kind: 'again' };
    throw err;
  }
  if (claim) return claim;
  return deps.engine.whyNotClaimed(req, refusedBy);
}
