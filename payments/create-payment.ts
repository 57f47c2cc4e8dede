import type { Logger } from 'pino';
import { type Sequelize, UniqueConstraintError } from 'sequelize';
import type { Config } from '../core/config.js';
import { ok } from '../core/envelope.js';
import { ServiceUnavailable, toErrorResponse } from '../core/errors.js';
import type { Charge, GatewayClient } from '../gateway/types.js';
import type { IdempotencyEngine, IdempotentRequest } from '../idempotency/engine.js';
import {
  claimWithLease,
  finishFenced,
  markRetryable,
  newOwnerToken,
  releaseLease,
  setResourceId,
  takeOver,
} from '../idempotency/lease.js';
import { deleteExpired, readRecord } from '../idempotency/record-store.js';
import { Order } from '../models/order.js';
import { Payment } from '../models/payment.js';
import type { Identity } from '../routers/auth/jwt.js';
import type { Context } from '../routers/context.js';
import { paymentLocation, preparePayment, toPaymentDto } from '../routers/payments/payments.handlers.js';
import type { CreatePaymentInput } from '../routers/payments/payments.schema.js';

export interface PaymentDeps {
  sequelize: Sequelize;
  engine: IdempotencyEngine;
  gateway: GatewayClient;
  config: Config;
  logger: Logger;
  onGateway?: (call: 'charge' | 'query', result: string) => void;
}

export interface FinalAnswer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

type Resolution =
  | { kind: 'final'; answer: FinalAnswer }
  | { kind: 'pending' }
  | { kind: 'not-charged' }
  | { kind: 'fenced' };

/**
 * Mode B for `POST /payments`. The charge cannot be rolled back, so:
 * Tx 1 commits the PROCESSING record (owner token + lease) with the payment row; the gateway is
 * called outside any transaction with `Idempotency-Key: paymentNo`; Tx 2 finalises only if the
 * lease is still ours. Whoever continues someone else's attempt asks the gateway first.
 */
export async function createPayment(
  deps: PaymentDeps,
  ctx: Context,
  auth: Identity,
  req: IdempotentRequest,
  input: CreatePaymentInput,
): Promise<unknown> {
  const { sequelize, engine, config } = deps;
  for (let attempt = 0; attempt < 4; attempt++) {
    const owner = newOwnerToken();
    const t = await sequelize.transaction();
    let payment: Payment;
    try {
      if (!(await claimWithLease(t, req, owner, config.IDEMPOTENCY_LEASE_MS, engine.limits))) {
        await t.rollback();
        const existing = await readRecord(sequelize, req.scopeKey);
        if (!existing) return await engine.refuseByCap(req);
        if (existing.expired && existing.status !== 'PROCESSING') {
          await deleteExpired(sequelize, req.scopeKey);
          continue;
        }
        const resumable =
          existing.status === 'FAILED_RETRYABLE' ||
          (existing.status === 'PROCESSING' && existing.leaseExpired);
        if (resumable && existing.requestHash === req.requestHash && existing.resourceId) {
          const taken = await takeOver(
            sequelize,
            req.scopeKey,
            existing.ownerToken,
            config.IDEMPOTENCY_LEASE_MS,
          );
          if (!taken) continue; // another executor won the takeover: look again
          engine.report(req.operation, 'lease_takeover', req);
          const resumed = await Payment.findByPk(existing.resourceId);
          if (!resumed) throw new Error(`payment ${existing.resourceId} of a PROCESSING record is missing`);
          return await answer(deps, ctx, req, taken, resumed, true);
        }
        return unwrap(await engine.answerExisting(ctx, req, existing));
      }
      const prepared = await preparePayment(t, auth, input);
      if (prepared.kind === 'refused') {
        const mapped = toErrorResponse(prepared.error);
        const body = engine.encryptResponse(req.scopeKey, mapped.status, {}, mapped.body);
        await finishFenced(t, req.scopeKey, owner, 'FAILED_FINAL', mapped.status, body);
        await t.commit();
        engine.report(req.operation, 'failed_final', req);
        throw prepared.error;
      }
      if (prepared.kind === 'existing') {
        // A new key for a merchantOrderNo that already has this payment: no second charge.
        const existingPayment = prepared.payment;
        if (existingPayment.status === 'PROCESSING') {
          await t.rollback();
          return unwrap(engine.processing(ctx, req, existingPayment.id));
        }
        const final = finalAnswer(existingPayment);
        const body = engine.encryptResponse(req.scopeKey, final.status, final.headers, final.body);
        await setResourceId(t, req.scopeKey, owner, existingPayment.id);
        await finishFenced(t, req.scopeKey, owner, 'SUCCEEDED', final.status, body);
        await t.commit();
        engine.report(req.operation, 'replayed', req);
        return apply(
          ctx,
          { ...final, headers: { ...final.headers, 'Idempotent-Replayed': 'true' } },
          existingPayment.id,
        );
      }
      payment = prepared.payment;
      await setResourceId(t, req.scopeKey, owner, payment.id);
      await t.commit();
    } catch (err) {
      if (!(t as unknown as { finished?: string }).finished) await t.rollback().catch(() => {});
      // Lost the race on (merchant_id, merchant_order_no): evaluate again against the winner's payment.
      if (err instanceof UniqueConstraintError) continue;
      throw err;
    }
    engine.report(req.operation, 'executed', req);
    return answer(deps, ctx, req, owner, payment, false);
  }
  return unwrap(engine.processing(ctx, req, null));
}

/** Runs the gateway part and turns its resolution into the HTTP answer of this request. */
async function answer(
  deps: PaymentDeps,
  ctx: Context,
  req: IdempotentRequest,
  owner: string,
  payment: Payment,
  queryFirst: boolean,
): Promise<unknown> {
  const resolution = await resolvePayment(deps, req.scopeKey, owner, payment, queryFirst);
  switch (resolution.kind) {
    case 'final':
      return apply(ctx, resolution.answer, payment.id);
    case 'not-charged':
      await markRetryable(deps.sequelize, req.scopeKey, owner);
      deps.engine.report(req.operation, 'failed_retryable', req);
      throw new ServiceUnavailable('Payment gateway unavailable; retry with the same Idempotency-Key', 1);
    case 'fenced': {
      const current = await readRecord(deps.sequelize, req.scopeKey);
      if (current) return unwrap(await deps.engine.answerExisting(ctx, req, current));
      return unwrap(deps.engine.processing(ctx, req, payment.id));
    }
    default:
      return unwrap(deps.engine.processing(ctx, req, payment.id));
  }
}

/**
 * Query-before-charge when continuing another executor's attempt (a lease alone does not prove the
 * earlier call failed). Shared by requests and the background recoverer.
 */
export async function resolvePayment(
  deps: PaymentDeps,
  scopeKey: string,
  owner: string,
  payment: Payment,
  queryFirst: boolean,
): Promise<Resolution> {
  const { gateway } = deps;
  if (queryFirst) {
    const q = await gateway.query(payment.paymentNo);
    deps.onGateway?.('query', q.kind);
    if (q.kind === 'found') return finalise(deps, scopeKey, owner, payment, q.charge);
    if (q.kind === 'unavailable') {
      // Cannot tell whether it was charged: never charge blind. Free the lease for the next try.
      await releaseLease(deps.sequelize, scopeKey, owner);
      return { kind: 'pending' };
    }
  }
  const outcome = await gateway.charge({
    paymentNo: payment.paymentNo,
    amount: String(payment.amount),
    currency: payment.currency,
  });
  deps.onGateway?.('charge', outcome.kind);
  if (outcome.kind === 'charged' || outcome.kind === 'declined')
    return finalise(deps, scopeKey, owner, payment, outcome.charge);
  if (outcome.kind === 'not-charged') return { kind: 'not-charged' };
  // Sent, outcome unknown (time-out, reset): ask before anything else.
  const q = await gateway.query(payment.paymentNo);
  deps.onGateway?.('query', q.kind);
  if (q.kind === 'found') return finalise(deps, scopeKey, owner, payment, q.charge);
  // Still unknown: keep the lease (the charge may yet land); a retry or the recoverer resolves it later.
  return { kind: 'pending' };
}

/** Tx 2: payment, order and record move together, only while the lease is ours (fencing). */
async function finalise(
  deps: PaymentDeps,
  scopeKey: string,
  owner: string,
  payment: Payment,
  charge: Charge,
): Promise<Resolution> {
  const t = await deps.sequelize.transaction();
  try {
    const succeeded = charge.status === 'SUCCEEDED';
    payment.set({
      status: succeeded ? 'SUCCEEDED' : 'FAILED',
      failureReason: succeeded ? null : 'DECLINED',
      chargeId: charge.chargeId,
    });
    await payment.save({ transaction: t });
    if (succeeded) await Order.update({ status: 'PAID' }, { where: { id: payment.orderId }, transaction: t });
    const answer = finalAnswer(payment);
    const body = deps.engine.encryptResponse(scopeKey, answer.status, answer.headers, answer.body);
    if (!(await finishFenced(t, scopeKey, owner, 'SUCCEEDED', answer.status, body))) {
      // Someone took over after our lease ended: they own the outcome now; write nothing.
      await t.rollback();
      await payment.reload();
      return { kind: 'fenced' };
    }
    await t.commit();
    return { kind: 'final', answer };
  } catch (err) {
    await t.rollback().catch(() => {});
    throw err;
  }
}

function finalAnswer(payment: Payment): FinalAnswer {
  return { status: 201, headers: { Location: paymentLocation(payment.id) }, body: ok(toPaymentDto(payment)) };
}

function apply(ctx: Context, final: FinalAnswer, resourceId: string): unknown {
  ctx.response.status = final.status;
  Object.assign(ctx.response.headers, final.headers);
  ctx.response.resourceId = resourceId;
  return final.body;
}

function unwrap(result: { ok: true; data: unknown } | { ok: false; error: unknown }): unknown {
  if (!result.ok) throw result.error;
  return result.data;
}
