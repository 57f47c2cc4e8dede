import {
  type AnyProcedure,
  getTRPCErrorFromUnknown,
  middlewareMarker,
  TRPCError,
} from '@trpc/server/unstable-core-do-not-import';

/** What one middleware of a procedure's chain is called with (tRPC 11's middleware options). */
interface StepOptions {
  ctx: object;
  type: 'query' | 'mutation';
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
 * A procedure as the REST facade calls it: the same middlewares in the same order with the same
 * options and results as tRPC's own caller (`createProcedureCaller` in @trpc/server 11), written with
 * native object spread. tRPC's published build compiles each spread of its caller to a Babel helper
 * (`_objectSpread2`: every key copied with `Object.defineProperty`), two or three per middleware: about
 * 7% of the service's CPU on a create, measured (docs/BENCHMARKS.md). The tRPC transport and
 * createCaller keep tRPC's caller; the transport tests hold both transports to the same answers.
 *
 * The procedure must be one this process built (its `_def.middlewares` end with the resolver).
 */
export function procedureCall(procedure: AnyProcedure): (opts: StepOptions) => Promise<unknown> {
  const { middlewares, meta } = chainOf(procedure);

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
      return { ok: false, error: getTRPCErrorFromUnknown(cause), marker: middlewareMarker } as StepResult;
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

/**
 * The procedure's middlewares (its resolver last): kept by tRPC 11 on `_def` at run time, not in its
 * published type. Checked at start, so that a tRPC without them fails there, not on a request.
 */
function chainOf(procedure: AnyProcedure): { middlewares: Middleware[]; meta: unknown } {
  const def: object = procedure._def;
  if (!('middlewares' in def) || !Array.isArray(def.middlewares) || def.middlewares.length === 0) {
    throw new Error('this tRPC keeps no middlewares on a procedure: server/procedure-call.ts needs them');
  }
  return { middlewares: def.middlewares, meta: procedure._def.meta };
}
