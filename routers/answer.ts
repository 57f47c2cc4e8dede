import type { IncomingMessage } from 'node:http';
import { errorEnvelopeSchema } from '../core/envelope.js';
import { DomainError } from '../core/errors.js';
import type { Outcome, OutcomeKind, Reply } from '../idempotency/outcome.js';
import { storedBodyJson } from '../idempotency/stored-reply.js';
import type { Context } from './context.js';
import { errorAnswer, toTrpcError } from './error-answer.js';
import { kindOfCode } from './error-table.js';

/** What a procedure answers: an outcome of the idempotency protocol, or a reply given without a key. */
export type Answer = Outcome | { kind: 'keyless'; reply: Reply };

/** What the transports need besides the tRPC result: the REST status, the headers, the outcome. */
export interface Delivered {
  /** Status of a success on the REST transport (an error takes its status from the error table). */
  status?: number;
  headers: Record<string, string>;
  /** What the idempotency protocol did, for the access log and metrics (absent without a key). */
  outcome?: OutcomeKind;
  /**
   * A replayed success's body as the exact JSON text stored with its record (the first answer's
   * bytes): the REST transport sends it as it is instead of serialising the result again.
   */
  bodyJson?: string;
}

/**
 * One record per HTTP request, written once by `deliver` and read by the transports. It exists
 * because tRPC gives a resolver no way to set the HTTP status or headers of its answer: the resolver
 * returns the body (or throws), and the adapters' responseMeta hooks run afterwards with the context
 * only. Keyed by the request object (every middleware hands the resolver a copy of the context, but
 * the request in it stays the same object), so it lives exactly as long as the request. A call
 * without HTTP (createCaller) has no request and nothing to record.
 */
const delivered = new WeakMap<IncomingMessage, Delivered>();

/**
 * The edge between an answer and tRPC: returns the body for the procedure's result, or throws the
 * TRPCError the error table gives, and records status, headers and outcome for the transports.
 */
export function deliver(ctx: Context, answer: Answer): unknown {
  const outcome = answer.kind === 'keyless' ? undefined : answer.kind;
  const record = (meta: Delivered) => {
    if (!ctx.request) return;
    if (delivered.has(ctx.request)) throw new Error('an answer was already delivered for this request');
    delivered.set(ctx.request, meta);
  };
  if ('error' in answer) {
    record({ headers: {}, outcome });
    throw toTrpcError(answer.error);
  }
  const { reply } = answer;
  const bodyJson = answer.kind === 'replayed' && reply.status < 400 ? storedBodyJson(reply) : undefined;
  record({
    status: reply.status,
    headers: reply.headers,
    outcome,
    ...(bodyJson === undefined ? {} : { bodyJson }),
  });
  if (reply.status >= 400) throw toTrpcError(storedFailure(reply));
  return reply.body;
}

/** What was delivered for this request (nothing for answers given without `deliver`, or errors before it). */
export function deliveredFor(request: IncomingMessage | undefined): Delivered | undefined {
  return request ? delivered.get(request) : undefined;
}

/**
 * Status and headers of an error answer on either transport: the error's own, plus the replay marker
 * when the error is a replayed stored failure (no other header of the stored answer applies to it).
 */
export function errorMeta(error: unknown, request: IncomingMessage | undefined) {
  const answer = errorAnswer(error);
  const replayed = deliveredFor(request)?.headers['Idempotent-Replayed'];
  const headers = replayed ? { ...answer.headers, 'Idempotent-Replayed': replayed } : answer.headers;
  return { status: answer.status, headers };
}

/**
 * A replayed final failure as the domain error it was: its kind looked up by the stored business code.
 * Only final failures are stored, and every one of them came from the table; anything else is a fault
 * of ours (an internal error, logged).
 */
function storedFailure(reply: Reply): unknown {
  const stored = errorEnvelopeSchema.safeParse(reply.body);
  const kind = stored.success ? kindOfCode(stored.data.code) : 'internal';
  if (!stored.success || kind === 'internal')
    return new Error(`unreadable stored failure (status ${reply.status})`);
  return new DomainError(kind, stored.data.message);
}
