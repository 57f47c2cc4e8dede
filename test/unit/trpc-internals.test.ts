// What the service relies on of @trpc/server beyond its documented API (routers/trpc-internals.ts):
// the procedure listing, the root config, and the fronts' caller `procedureCall`, held to tRPC's own
// public `callTRPCProcedure` on a tiny router; the subscription check `procedureCheck` (the same chain
// without its resolver) and `httpCallOf` (tRPC's reading of a request's input). A tRPC upgrade that changes any of it fails here first.
import { callTRPCProcedure, getErrorShape, initTRPC, TRPCError, transformTRPCResponse } from '@trpc/server';
import { expect } from 'chai';
import { z } from 'zod';
import {
  httpCallOf,
  procedureCall,
  procedureCheck,
  proceduresOf,
  rootConfigOf,
} from '../../routers/trpc-internals.js';

const t = initTRPC
  .context<{ tenant: string }>()
  .meta<{ label?: string }>()
  .create({
    errorFormatter: ({ shape, error }) => ({ ...shape, data: { mine: error.code } }),
  });
const steps: string[] = [];
const withUser = t.procedure.use(({ ctx, next }) => {
  steps.push('auth');
  return next({ ctx: { user: `${ctx.tenant}:7` } });
});
const input = z.object({ name: z.string().min(1), age: z.number().int().default(30) });
const router = t.router({
  users: t.router({
    create: withUser
      .meta({ label: 'create' })
      .input(input)
      .output(z.object({ who: z.string(), name: z.string(), age: z.number() }))
      .mutation(({ ctx, input }) => ({ who: `${ctx.tenant}/${ctx.user}`, name: input.name, age: input.age })),
  }),
  badOutput: t.procedure.output(z.object({ n: z.number() })).query(() => ({ n: 'not a number' }) as never),
  refuses: withUser
    .use(() => {
      throw new TRPCError({ code: 'FORBIDDEN', message: 'not you' });
    })
    .query(() => 'never'),
  throwsPlain: t.procedure.query(() => {
    throw new Error('boom');
  }),
  noNext: t.procedure.use((() => undefined) as never).query(() => 'never'),
  events: withUser
    .input(z.object({ lastEventId: z.string().regex(/^c[0-9]+$/) }).optional())
    .subscription(() => {
      steps.push('resolver');
      return (async function* () {})();
    }),
});

type Settled = { data?: unknown; error?: unknown };

/** Both callers on the same procedure and input: tRPC's own, and the fronts' (procedureCall). */
async function both(path: string, type: 'query' | 'mutation', raw: unknown) {
  const run = async (caller: 'trpc' | 'ours'): Promise<{ settled: Settled; steps: string[] }> => {
    steps.length = 0;
    const opts = {
      ctx: { tenant: 't1' },
      path,
      type,
      input: undefined,
      getRawInput: async () => {
        steps.push('input read');
        return raw;
      },
      signal: undefined,
      batchIndex: 0,
    };
    const settled = await (caller === 'trpc'
      ? callTRPCProcedure({ ...opts, router })
      : procedureCall(router, path)(opts)
    ).then(
      (data: unknown) => ({ data }),
      (error: unknown) => ({ error }),
    );
    return { settled, steps: [...steps] };
  };
  const trpc = await run('trpc');
  const ours = await run('ours');
  expect(ours.steps, 'the same steps').to.deep.equal(trpc.steps);
  return { trpc: trpc.settled, ours: ours.settled, steps: ours.steps };
}

function errorOf(r: { data?: unknown; error?: unknown }): TRPCError {
  expect(r.error, `expected an error, got ${JSON.stringify(r.data)}`).to.be.instanceOf(TRPCError);
  return r.error as TRPCError;
}

describe('tRPC beyond its documented API (routers/trpc-internals.ts), on a tiny router', () => {
  it('when the router is listed, then every procedure comes flat by path with its type, meta and input parser', () => {
    const entries = proceduresOf(router);
    expect(entries.map((e) => [e.path, e.type])).to.have.deep.members([
      ['users.create', 'mutation'],
      ['badOutput', 'query'],
      ['refuses', 'query'],
      ['throwsPlain', 'query'],
      ['noNext', 'query'],
      ['events', 'subscription'],
    ]);
    const create = entries.find((e) => e.path === 'users.create');
    expect(create?.meta).to.deep.equal({ label: 'create' });
    expect(create?.inputs).to.have.length(1);
    expect(create?.inputs[0]).to.equal(input);
    expect(entries.find((e) => e.path === 'badOutput')?.inputs).to.deep.equal([]);
  });

  it("when an error is shaped with the root config, then the router's own formatter and transformer answer", () => {
    const config = rootConfigOf(router);
    const error = new TRPCError({ code: 'CONFLICT', message: 'taken' });
    const shape = getErrorShape({
      config,
      ctx: undefined,
      error,
      input: undefined,
      path: 'p',
      type: 'mutation',
    });
    expect(shape).to.deep.include({ message: 'taken', code: -32009, data: { mine: 'CONFLICT' } });
    expect(transformTRPCResponse(config, { error: shape })).to.deep.equal({ error: shape });
    expect(transformTRPCResponse(config, { result: { data: 1 } })).to.deep.equal({ result: { data: 1 } });
    expect(config.transformer.input.deserialize({ a: 1 })).to.deep.equal({ a: 1 });
  });
});

describe("the fronts' procedure caller (procedureCall) against tRPC's own (callTRPCProcedure)", () => {
  it('when a procedure adds to the context and parses its input, then both give the same data, the input read after the middleware before it', async () => {
    const { trpc, ours, steps } = await both('users.create', 'mutation', { name: 'Ada' });
    expect(ours).to.deep.equal({ data: { who: 't1/t1:7', name: 'Ada', age: 30 } });
    expect(ours).to.deep.equal(trpc);
    // The tRPC front reads the body only when the chain asks (after authentication), as tRPC does.
    expect(steps).to.deep.equal(['auth', 'input read']);
  });

  it('when the input is invalid, then both refuse it as BAD_REQUEST with the same message', async () => {
    const { trpc, ours } = await both('users.create', 'mutation', { name: '', extra: 1 });
    expect(errorOf(ours).code).to.equal('BAD_REQUEST');
    expect(errorOf(ours).message).to.equal(errorOf(trpc).message);
  });

  it('when the output does not match its schema, then both answer INTERNAL_SERVER_ERROR', async () => {
    const { trpc, ours } = await both('badOutput', 'query', undefined);
    expect(errorOf(ours).code).to.equal('INTERNAL_SERVER_ERROR');
    expect(errorOf(ours).message).to.equal(errorOf(trpc).message);
  });

  it('when a middleware throws a TRPCError or a resolver a plain Error, then both give the same code and cause', async () => {
    const refused = await both('refuses', 'query', undefined);
    expect([errorOf(refused.ours).code, errorOf(refused.ours).message]).to.deep.equal([
      'FORBIDDEN',
      'not you',
    ]);
    expect(errorOf(refused.trpc).code).to.equal('FORBIDDEN');
    const plain = await both('throwsPlain', 'query', undefined);
    expect(errorOf(plain.ours).code).to.equal('INTERNAL_SERVER_ERROR');
    expect((errorOf(plain.ours).cause as Error).message).to.equal('boom');
    expect(errorOf(plain.ours).code).to.equal(errorOf(plain.trpc).code);
  });

  it('when a middleware returns without calling next, then both say so', async () => {
    const { trpc, ours } = await both('noNext', 'query', undefined);
    expect(errorOf(ours).message).to.match(/No result from middlewares/);
    expect(errorOf(ours).message).to.equal(errorOf(trpc).message);
  });

  it('when a path has no procedure, then procedureCall refuses at start, not on a request', () => {
    expect(() => procedureCall(router, 'users.nope')).to.throw(/no middlewares on procedure users.nope/);
  });
});

describe('the subscription check (procedureCheck, httpCallOf) against tRPC', () => {
  const ctx = { tenant: 't1' };
  const options = (getRawInput: () => Promise<unknown>) => ({
    ctx,
    path: 'events',
    type: 'subscription' as const,
    input: undefined,
    getRawInput,
    signal: undefined,
    batchIndex: 0,
  });

  it("when a subscription is checked, then its middlewares and input parser run as in tRPC's call, and its resolver does not", async () => {
    steps.length = 0;
    await callTRPCProcedure({ ...options(async () => ({ lastEventId: 'c1' })), router });
    expect(steps).to.deep.equal(['auth', 'resolver']);
    steps.length = 0;
    await procedureCheck(router, 'events')(options(async () => ({ lastEventId: 'c1' })));
    expect(steps).to.deep.equal(['auth']);
    const refusedBy = async (check: boolean) => {
      const opts = options(async () => ({ lastEventId: 'nope' }));
      const call = check ? procedureCheck(router, 'events')(opts) : callTRPCProcedure({ ...opts, router });
      return errorOf(
        await call.then(
          (data: unknown) => ({ data }),
          (error: unknown) => ({ error }),
        ),
      );
    };
    const [ours, trpc] = [await refusedBy(true), await refusedBy(false)];
    expect(ours.code).to.equal('BAD_REQUEST');
    expect(ours.message).to.equal(trpc.message);
  });

  it("when a request's call is read, then its raw input is tRPC's: Last-Event-ID merged in, input that is not JSON a BAD_REQUEST", async () => {
    const request = (query: string, headers: Record<string, string> = {}) =>
      new Request(`http://localhost/trpc/events?${query}`, { headers });
    const resumed = await httpCallOf(router, request('input={}', { 'Last-Event-ID': 'c7' }), 'events');
    expect(await resumed?.getRawInput()).to.deep.equal({ lastEventId: 'c7' });
    const bare = await httpCallOf(router, request('lastEventId=c8'), 'events');
    expect(await bare?.getRawInput()).to.deep.equal({ lastEventId: 'c8' });
    const garbage = await httpCallOf(router, request('input=garbage'), 'events');
    const error = await garbage?.getRawInput().then(
      () => expect.fail('garbage was read as JSON'),
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(TRPCError);
    expect((error as TRPCError).code).to.equal('BAD_REQUEST');
    expect(await httpCallOf(router, request('batch=1&input={}'), 'events')).to.equal(undefined);
  });

  it('when a path has no procedure, then procedureCheck refuses at start, not on a request', () => {
    expect(() => procedureCheck(router, 'users.nope')).to.throw(/no middlewares on procedure users.nope/);
  });
});
