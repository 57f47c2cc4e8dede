import { type AnyRouter, getTRPCErrorFromUnknown, TRPCError } from '@trpc/server';
import { getRequestInfo } from '@trpc/server/unstable-core-do-not-import';

/**
 * Everything the service reads of tRPC that its public API does not offer, in this one file. Written
 * against @trpc/server 11.25.2; test/unit/trpc-internals.test.ts fails when an upgrade changes any of
 * it (it holds `procedureCall` to tRPC's public `callTRPCProcedure` on the same procedures). Errors go
 * through the public `getErrorShape` and `transformTRPCResponse`, which take the root config read here.
 *
 * - `router._def.procedures`: every procedure by its flat path ('users.create'), with its type, meta
 *   and input parsers. tRPC has no public listing of them (trpc-to-openapi reads the same member);
 *   the REST front routes by it, the OpenAPI document and the fronts read each one's meta.
 * - `router._def._config`: the root config (error formatter, transformer) that `getErrorShape` and
 *   `transformTRPCResponse` need, so that the tRPC front answers byte for byte as tRPC's node adapter.
 * - `procedure._def.middlewares`: the chain `procedureCall` runs (below), for speed; and that chain
 *   without its resolver (`procedureCheck`, the last middleware, tRPC's `resolveMiddleware`), so that a
 *   subscription's authentication and input are checked before its stream is opened.
 * - `getRequestInfo` (an `unstable-core-do-not-import` export): how tRPC's HTTP handler reads a
 *   request's call and raw input, so that the subscription check reads the input the adapter will.
 */

export type ProcedureType = 'query' | 'mutation' | 'subscription';

/** One procedure as the router holds it. */
export interface ProcedureEntry {
  path: string;
  type: ProcedureType;
  /** What `.meta()` was given (undefined without). */
  meta: unknown;
  /** Its `.input()` parsers, in the order they were chained. */
  inputs: readonly unknown[];
}

/** Every procedure of the router, by its flat path. */
export function proceduresOf(router: AnyRouter): ProcedureEntry[] {
  const procedures: Record<string, unknown> = router._def.procedures;
  return Object.entries(procedures).map(([path, procedure]) => entryOf(path, procedure));
}

/** The root config `getErrorShape` and `transformTRPCResponse` take. */
export function rootConfigOf<R extends AnyRouter>(router: R): R['_def']['_config'] {
  const config = router._def._config;
  if (!config?.transformer?.input || typeof config.errorFormatter !== 'function') {
    throw new Error(
      'this tRPC keeps no root config on router._def._config: routers/trpc-internals.ts needs it',
    );
  }
  return config;
}

/** Checked at start, so that a tRPC that keeps procedures another way fails there, not on a request. */
function entryOf(path: string, procedure: unknown): ProcedureEntry {
  const def = typeof procedure === 'function' && '_def' in procedure ? procedure._def : undefined;
  if (typeof def !== 'object' || def === null || !('type' in def) || !('inputs' in def)) {
    throw new Error(`this tRPC keeps no _def on procedure ${path}: routers/trpc-internals.ts needs it`);
  }
  const { type, inputs } = def;
  if ((type !== 'query' && type !== 'mutation' && type !== 'subscription') || !Array.isArray(inputs)) {
    throw new Error(
      `procedure ${path} has an unknown _def shape: routers/trpc-internals.ts needs type and inputs`,
    );
  }
  return { path, type, meta: 'meta' in def ? def.meta : undefined, inputs };
}

/** What one middleware of a procedure's chain is called with (tRPC 11's middleware options). */
export interface StepOptions {
  ctx: object;
  type: ProcedureType;
  path: string;
  input: unknown;
  getRawInput: () => Promise<unknown>;
  signal: AbortSignal | undefined;
  batchIndex: number;
}

type StepResult = { ok: true; data: unknown } | { ok: false; error: TRPCError };

type Middleware = (
  opts: StepOptions & {
    meta: unknown;
    next(nextOpts?: {
      ctx?: object;
      input?: unknown;
      getRawInput?: () => Promise<unknown>;
    }): Promise<StepResult>;
  },
) => Promise<StepResult>;

/**
 * The procedure at `path`, called as tRPC's own caller calls it (`createProcedureCaller` in
 * @trpc/server 11: the same middlewares in the same order with the same options and results), with
 * native object spread. tRPC's published build compiles each spread of its caller to a Babel helper
 * (`_objectSpread2`), two or three per middleware: 15-20 µs of CPU more per call on the service's
 * chain, about 6-7% of a create's CPU (docs/BENCHMARKS.md item 14; measured again for issue 26), so
 * both fronts keep this caller, resolved once at start.
 */
export function procedureCall(router: AnyRouter, path: string): (opts: StepOptions) => Promise<unknown> {
  const { middlewares, meta } = chainOf(router, path);
  return callerOf(middlewares, meta);
}

/**
 * The procedure at `path` up to its resolver: its middlewares and input parsers run as `procedureCall`
 * runs them (authentication, then the input parsed with the procedure's own schema), and where the
 * resolver would run the call ends, successfully. Throws the error the call would have failed with.
 *
 * Why: tRPC's HTTP handler calls a subscription before it answers, but writes any failure of that
 * call as an event of a 200 SSE stream (@trpc/server 11 `resolveResponse`, case 'subscription'), so a
 * missing token or a bad input would never be a 401 or a 400. Running the same chain first, without
 * the resolver (which starts the stream's work), finds those failures in the procedure's own rules.
 */
export function procedureCheck(router: AnyRouter, path: string): (opts: StepOptions) => Promise<void> {
  const { middlewares, meta } = chainOf(router, path);
  const resolver = middlewares[middlewares.length - 1];
  if (resolver.name !== 'resolveMiddleware') {
    throw new Error(
      `procedure ${path} does not end with tRPC's resolveMiddleware: routers/trpc-internals.ts needs it`,
    );
  }
  const passed: Middleware = async () => ({ ok: true, data: undefined });
  const call = callerOf([...middlewares.slice(0, -1), passed], meta);
  return async (opts) => {
    await call(opts);
  };
}

/**
 * The one call of a single (not batched) tRPC HTTP request, read as tRPC's HTTP handler reads it
 * (`getRequestInfo`, the first step of `resolveResponse`): `getRawInput` gives the input the adapter
 * would hand the procedure, with tRPC's own errors (`?input=` that is not JSON: BAD_REQUEST), and for
 * a subscription with the Last-Event-ID (header or query) merged in; `input` what it has read.
 * Undefined for a batch, or a request that names no procedure: those the adapter answers itself.
 */
export async function httpCallOf(
  router: AnyRouter,
  request: Request,
  path: string,
): Promise<{ getRawInput: () => Promise<unknown>; input: () => unknown } | undefined> {
  const url = new URL(request.url);
  const info = await getRequestInfo({
    req: request,
    path,
    router,
    url,
    searchParams: url.searchParams,
    headers: request.headers,
  });
  const call = info.calls[0];
  if (info.isBatchCall || info.calls.length !== 1 || !call.procedure) return undefined;
  return { getRawInput: call.getRawInput, input: call.result };
}

/** The chain called as tRPC's own caller calls it (`procedureCall`, `procedureCheck`). */
function callerOf(middlewares: Middleware[], meta: unknown): (opts: StepOptions) => Promise<unknown> {
  const step = async (index: number, opts: StepOptions): Promise<StepResult> => {
    try {
      return await middlewares[index]({
        ...opts,
        meta,
        next: (nextOpts) =>
          step(index + 1, {
            ...opts,
            ctx: nextOpts?.ctx ? { ...opts.ctx, ...nextOpts.ctx } : opts.ctx,
            input: nextOpts && 'input' in nextOpts ? nextOpts.input : opts.input,
            getRawInput: nextOpts?.getRawInput ?? opts.getRawInput,
          }),
      });
    } catch (cause) {
      return { ok: false, error: getTRPCErrorFromUnknown(cause) };
    }
  };
  return async (opts) => {
    const result = await step(0, opts);
    if (!result) {
      throw new TRPCError({
        code: 'INTERNAL_SERVER_ERROR',
        message: 'No result from middlewares - did you forget to `return next()`?',
      });
    }
    if (!result.ok) throw result.error;
    return result.data;
  };
}

/** The procedure's middlewares (its resolver last), checked at start rather than on a request. */
function chainOf(router: AnyRouter, path: string): { middlewares: Middleware[]; meta: unknown } {
  const procedures: Record<string, unknown> = router._def.procedures;
  const procedure = procedures[path];
  const def = typeof procedure === 'function' && '_def' in procedure ? procedure._def : undefined;
  if (typeof def !== 'object' || def === null || !('middlewares' in def)) {
    throw new Error(
      `this tRPC keeps no middlewares on procedure ${path}: routers/trpc-internals.ts needs them`,
    );
  }
  const { middlewares } = def;
  if (!Array.isArray(middlewares) || middlewares.length === 0) {
    throw new Error(`procedure ${path} has no middlewares: routers/trpc-internals.ts needs its chain`);
  }
  return { middlewares, meta: 'meta' in def ? def.meta : undefined };
}
