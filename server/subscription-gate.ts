import type { IncomingMessage, ServerResponse } from 'node:http';
import { type AnyRouter, getTRPCErrorFromUnknown } from '@trpc/server';
import { incomingMessageToRequest } from '@trpc/server/adapters/node-http';
import type { NextFunction, Request, Response } from 'express';
import { MethodNotAllowed } from '../core/errors.js';
import { errorAnswer } from '../routers/error-answer.js';
import { httpCallOf, procedureCheck, proceduresOf, rootConfigOf } from '../routers/trpc-internals.js';
import type { AppServices } from './app-services.js';
import { clientGone, contextFor } from './context-for.js';
import { localsOf } from './locals.js';
import { errorReply, writeRefusal, writeReply } from './trpc-reply.js';

/**
 * Express middleware on /trpc, ahead of tRPC's adapter: a subscription request (`GET
 * /trpc/events.onEvent?input=...`) that would fail before its first event (a missing, malformed or
 * wrongly signed token; an input its schema refuses) is answered as a plain tRPC HTTP error, the
 * status of the error table (401 with `WWW-Authenticate: Bearer`, 400, 403...) and tRPC's error body,
 * without opening a stream. tRPC's adapter would answer 200 and put the error in the stream
 * (routers/trpc-internals.ts `procedureCheck` says where), while CONTRACT sections 1 and 4 want the
 * REST status on every tRPC error.
 *
 * The check is the procedure's own chain without its resolver (the same authentication and the same
 * zod input, read from the request as the adapter reads it); a request that passes goes on to the
 * adapter, which runs the chain again and opens the stream, so an authorised subscription behaves as
 * before. The cost is that chain twice per connection (one more user row read), not per event.
 */
export function subscriptionGate(router: AnyRouter, services: AppServices) {
  const config = rootConfigOf(router);
  const checks = new Map<string, ReturnType<typeof procedureCheck>>();
  for (const { path, type } of proceduresOf(router)) {
    if (type === 'subscription') checks.set(path, procedureCheck(router, path));
  }

  const check = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> => {
    const run = checks.get(path);
    if (!run) return true;
    const ctx = contextFor(services, req, res, clientGone(res));
    let call: Awaited<ReturnType<typeof httpCallOf>>;
    try {
      call = await httpCallOf(router, incomingMessageToRequest(req, res, { maxBodySize: null }), path);
      if (!call) return true;
      await run({
        ctx,
        path,
        type: 'subscription',
        input: undefined,
        getRawInput: call.getRawInput,
        signal: undefined,
        batchIndex: 0,
      });
      return true;
    } catch (cause) {
      const error = getTRPCErrorFromUnknown(cause);
      if (errorAnswer(error).internal) {
        services.logger.error({ err: error, reqId: localsOf(res).requestId }, 'unhandled error');
      }
      const input = call?.input();
      writeReply(
        res,
        config,
        errorReply(config, { error, ctx, input, path, type: 'subscription', request: req }),
      );
      return false;
    }
  };

  // Any other method on a subscription's path: tRPC's adapter would answer it with a 200 stream whose
  // one event is METHOD_NOT_SUPPORTED; a plain 405 with `Allow: GET`, as the REST side answers.
  const notAllowed = (request: IncomingMessage, res: ServerResponse, path: string) =>
    writeRefusal(res, config, new MethodNotAllowed(['GET']), { path, type: 'subscription', request });

  return async (req: Request, res: Response, next: NextFunction) => {
    const path = req.path.slice(1);
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (req.method === 'GET' && !(await check(req, res, path))) return;
    } else if (checks.has(path)) return notAllowed(req, res, path);
    next();
  };
}
