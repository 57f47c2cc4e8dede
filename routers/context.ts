import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import type { Cancellation, IdempotencyEngine } from '../idempotency/engine.js';
import type { OutcomeKind } from '../idempotency/outcome.js';
import type { IdBlocks } from '../models/id-blocks.js';
import type { PaymentDeps } from '../payments/payment-deps.js';
import type { Identity } from './auth/jwt.js';
import type { Prefetched } from './auth/who.js';

/** What the procedures use of the process, built once at start (server/server.ts) and shared. */
export interface Services {
  config: Config;
  sequelize: Sequelize;
  idempotency: IdempotencyEngine;
  /** New rows' ids, taken from their sequences in blocks (keyed creates sent as one statement). */
  ids: IdBlocks;
  payments: PaymentDeps;
  /** Counts what the idempotency protocol did, per operation (a Prometheus counter in server/). */
  countOutcome(operation: string, outcome: OutcomeKind): void;
  /** Starts a background effect's work on a row (server/background-effects.ts); set once jobs run. */
  background?: { enqueue(effect: string, id: string): Promise<unknown> };
}

export interface Context {
  services: Services;
  headers: IncomingHttpHeaders;
  requestId: string;
  /** Aborted when the client goes away: stops the engine's waits, never undoes work. */
  signal?: Cancellation;
  /** The HTTP request this call answers (absent for createCaller): what the answer edge keys on. */
  request?: IncomingMessage;
  /**
   * When the call reached its procedure (Date.now()): the start of its wait bound (CONTRACT section 5:
   * no request waits longer than IDEMPOTENCY_WAIT_MS for another request's work, a busy connection
   * pool included), so a wait for a pooled connection is not followed by a whole bound on a lock.
   * Unset without HTTP (createCaller: one context may serve many calls): each call's bound then runs
   * from the engine's call.
   */
  receivedAt?: number;
}

/**
 * After authentication; `prefetched`: the key's record, read with the user row (routers/auth/who.ts).
 * `userCheckInWrite`: the user row was not read; `auth` is the token's identity, and the write must
 * carry the row's rule itself (routers/trpc.ts authedProcedure).
 */
export type AuthedContext = Context & { auth: Identity; prefetched?: Prefetched; userCheckInWrite?: boolean };

export function createContextValue(
  services: Services,
  headers: IncomingHttpHeaders,
  requestId: string,
  http?: { request: IncomingMessage; signal?: Cancellation },
): Context {
  return {
    services,
    headers,
    requestId,
    signal: http?.signal,
    request: http?.request,
    receivedAt: http ? Date.now() : undefined,
  };
}
