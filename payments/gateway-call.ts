import { GatewayError } from '../gateway/client.js';
import type { Downstream } from '../idempotency/effect.js';
import type { PaymentDeps } from './payment-deps.js';

/** Each outcome of the gateway client's calls as the effect mechanism reads it. */
const AS_DOWNSTREAM = {
  charged: 'done',
  refunded: 'done',
  declined: 'done',
  found: 'done',
  'not-charged': 'not_done',
  'not-refunded': 'not_done',
  none: 'not_done',
  unknown: 'unknown',
  unavailable: 'unknown',
} as const;

/** What the client's charge, refund and their queries answer (gateway/types.ts): a kind, the entry. */
type GatewayOutcome<R> = { kind: keyof typeof AS_DOWNSTREAM; charge?: R; refund?: R };

/**
 * One call of the gateway for an effect (a charge or a refund, sent with its downstream key as
 * `Idempotency-Key`, or the query of one), counted by call and outcome. A 4xx (GatewayError) means
 * the gateway refused the request and did nothing: an attempt is then not done, so resumable as after
 * a 5xx (an operator may fix the cause), never a 500 for the client or an error that stops the
 * recoverer's batch; a query is unanswered.
 */
export async function gatewayCall<R>(
  deps: Pick<PaymentDeps, 'onGateway'>,
  call: 'charge' | 'query' | 'refund' | 'refund-query',
  send: () => Promise<GatewayOutcome<R>>,
): Promise<Downstream<R>> {
  const refused: GatewayOutcome<R>['kind'] =
    call === 'charge' ? 'not-charged' : call === 'refund' ? 'not-refunded' : 'unavailable';
  const outcome = await send().catch((err: unknown): GatewayOutcome<R> => {
    if (err instanceof GatewayError) return { kind: refused };
    throw err;
  });
  deps.onGateway?.(call, outcome.kind);
  const kind = AS_DOWNSTREAM[outcome.kind];
  if (kind !== 'done') return { kind };
  const result = outcome.charge ?? outcome.refund;
  if (result === undefined) throw new Error(`gateway ${call} answered ${outcome.kind} without its entry`);
  return { kind, result };
}
