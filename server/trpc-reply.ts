import type { IncomingMessage, ServerResponse } from 'node:http';
import { type AnyRouter, getErrorShape, type TRPCError, transformTRPCResponse } from '@trpc/server';
import type { TRPCResponse } from '@trpc/server/rpc';
import type { DomainError } from '../core/errors.js';
import { deliveredFor, errorMeta } from '../routers/answer.js';
import { toTrpcError } from '../routers/error-answer.js';
import type { ProcedureType } from '../routers/trpc-internals.js';

/** The router's root config (routers/trpc-internals.ts rootConfigOf). */
type RootConfig = AnyRouter['_def']['_config'];

/**
 * One answer of the tRPC transport as tRPC's node adapter writes a single (not batched) call: its
 * status, headers and body before `transformTRPCResponse`. Every answer on /trpc that the service
 * gives itself instead of the adapter (the tRPC front, the media-type check, the subscription gate)
 * is built here, so that each one is the adapter's answer, never the REST envelope.
 */
export interface TrpcReply {
  status: number;
  headers: Record<string, string>;
  body: TRPCResponse;
}

/** The adapter's headers of every JSON answer, in the order it sets them. */
const jsonHeaders = () => ({ vary: 'trpc-accept, accept', 'content-type': 'application/json' });

/** A success: 200, the result, and the headers the answer recorded (Location, Idempotent-Replayed...). */
export function resultReply(data: unknown, request: IncomingMessage): TrpcReply {
  return {
    status: 200,
    headers: { ...jsonHeaders(), ...(deliveredFor(request)?.headers ?? {}) },
    body: { result: { data } },
  };
}

/**
 * A failure: the shape of the router's error formatter (`getErrorShape`, as tRPC's `resolveResponse`
 * builds it), with the status and headers of routers/answer.ts `errorMeta`, as the adapter's
 * `responseMeta` in server/app.ts gives them.
 */
export function errorReply(
  config: RootConfig,
  call: {
    error: TRPCError;
    ctx: unknown;
    input: unknown;
    path: string | undefined;
    type: ProcedureType | 'unknown';
    request: IncomingMessage | undefined;
  },
): TrpcReply {
  const { error, ctx, input, path, type, request } = call;
  const meta = errorMeta(error, request);
  return {
    status: meta.status,
    headers: { ...jsonHeaders(), ...meta.headers },
    body: { error: getErrorShape({ config, ctx, error, input, path, type }) },
  };
}

/** Writes the reply in one piece, its body transformed as tRPC transforms it. */
export function writeReply(res: ServerResponse, config: RootConfig, reply: TrpcReply): void {
  res.statusCode = reply.status;
  for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
  res.end(JSON.stringify(transformTRPCResponse(config, reply.body)));
}

/**
 * A refusal the service answers on /trpc before any procedure runs (no context, no input): a wrong
 * media type, a method a subscription's path does not take. `path` is the procedure's, for `data.path`.
 */
export function writeRefusal(
  res: ServerResponse,
  config: RootConfig,
  refusal: DomainError,
  call: { path: string; type: ProcedureType | 'unknown'; request: IncomingMessage },
): void {
  const error = toTrpcError(refusal);
  writeReply(res, config, errorReply(config, { ...call, error, ctx: undefined, input: undefined }));
}
