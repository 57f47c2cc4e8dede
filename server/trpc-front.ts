import type { IncomingMessage, ServerResponse } from 'node:http';
import { type AnyRouter, getTRPCErrorFromUnknown, TRPCError } from '@trpc/server';
import { errorAnswer } from '../routers/error-answer.js';
import { procedureCall, proceduresOf, rootConfigOf } from '../routers/trpc-internals.js';
import { frontRequestSetup } from './access-log.js';
import type { AppServices } from './app-services.js';
import { clientGone, contextFor } from './context-for.js';
import { localsOf } from './locals.js';
import { isJson } from './rest.js';
import { errorReply, resultReply, type TrpcReply, writeReply } from './trpc-reply.js';

const PREFIX = '/trpc/';

/**
 * The tRPC front: answers the one tRPC request of the service's load, a single (not batched) POST of
 * a mutation with a JSON body, before and without Express and tRPC's own HTTP adapter, with the same
 * answer they give: the same status, headers and body bytes. Everything else on /trpc (queries,
 * batches, any query string, other media types, unknown procedures, other methods) goes on to them.
 *
 * What it keeps of tRPC is the protocol's own code: the procedure's chain (routers/trpc-internals.ts
 * procedureCall, as the REST front calls it), `getErrorShape` with the router's error formatter, and
 * `transformTRPCResponse`, as tRPC's `resolveResponse` uses them for such a request (in
 * server/trpc-reply.ts, shared with the other answers the service gives on /trpc itself); and the
 * same `responseMeta` and `onError` as the adapter's options in server/app.ts. The input is read when the
 * chain asks for it, as tRPC reads it (after authentication), with the same errors: a body over
 * MAX_BODY_BYTES is PAYLOAD_TOO_LARGE, a body that is not JSON is BAD_REQUEST with the parser's
 * message, an empty body is no input.
 *
 * Why: tRPC 11's node adapter turns each request into a Fetch `Request` (headers copied, an
 * AbortController, a body stream) and writes its `Response` back through a WritableStream. For a
 * user create that was 0.87 ms of the service's CPU against 0.26 ms for the same create over REST
 * (docs/BENCHMARKS.md item 20).
 *
 * Returns false, having touched nothing, when the request is not one it answers.
 */
export function createTrpcFront(router: AnyRouter, services: AppServices) {
  const config = rootConfigOf(router);
  const limit = services.config.MAX_BODY_BYTES;
  const setUp = frontRequestSetup(services.logger, services.metrics);
  const { logger } = services;
  const mutations = new Map<string, ReturnType<typeof procedureCall>>();
  for (const { path, type } of proceduresOf(router)) {
    if (type === 'mutation') mutations.set(path, procedureCall(router, path));
  }

  const answer = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    const call = mutations.get(path);
    if (!call) throw new Error(`no mutation ${path}`);
    const ctx = contextFor(services, req, res, clientGone(res));
    let reading: Promise<unknown> | undefined;
    let input: unknown;
    const getRawInput = () => {
      reading ??= readInput(req, limit).then((raw) => {
        input = raw === undefined ? undefined : config.transformer.input.deserialize(raw);
        return input;
      });
      return reading;
    };
    let reply: TrpcReply;
    try {
      const data = await call({
        ctx,
        path,
        type: 'mutation',
        input: undefined,
        getRawInput,
        signal: undefined,
        batchIndex: 0,
      });
      reply = resultReply(data, req);
    } catch (cause) {
      const error = getTRPCErrorFromUnknown(cause);
      if (errorAnswer(error).internal) {
        logger.error({ err: error, reqId: localsOf(res).requestId }, 'unhandled error');
      }
      reply = errorReply(config, { error, ctx, input, path, type: 'mutation', request: req });
    }
    writeReply(res, config, reply);
  };

  return (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = req.url ?? '';
    if (req.method !== 'POST' || !url.startsWith(PREFIX) || url.includes('?')) return false;
    const path = url.slice(PREFIX.length);
    if (!mutations.has(path) || !isJson(req.headers['content-type'])) return false;
    setUp(req, res, `/trpc/${path}`);
    answer(req, res, path).catch((err: unknown) => {
      logger.error({ err, reqId: localsOf(res).requestId }, 'unhandled error');
      if (!res.headersSent) {
        res.statusCode = 500;
        res.end();
      } else res.destroy();
    });
    return true;
  };
}

/**
 * The body as tRPC's JSON handler reads it: UTF-8 text (a BOM dropped, as `Request#text` does), no
 * text no input, else JSON; over `limit` bytes PAYLOAD_TOO_LARGE, and any other failure BAD_REQUEST
 * with its message.
 */
function readInput(req: IncomingMessage, limit: number): Promise<unknown> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      cleanup();
      reject(new TRPCError({ code: 'PAYLOAD_TOO_LARGE' }));
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  })
    .then((bytes) => {
      const text = new TextDecoder().decode(bytes);
      return text ? JSON.parse(text) : undefined;
    })
    .catch((cause: unknown) => {
      if (cause instanceof TRPCError) throw cause;
      throw new TRPCError({
        code: 'BAD_REQUEST',
        message: cause instanceof Error ? cause.message : 'Invalid input',
        cause,
      });
    });
}
