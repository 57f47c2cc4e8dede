import { initTRPC, TRPCError } from '@trpc/server';
import { type AnyProcedure, callProcedure } from '@trpc/server/unstable-core-do-not-import';
import { expect } from 'chai';
import { z } from 'zod';
import { procedureCall } from '../../server/procedure-call.js';

/** A router whose procedures exercise what a chain does: context, input, output, errors. */
const t = initTRPC.context<{ tenant: string }>().create();
const withUser = t.procedure.use(({ ctx, next }) => next({ ctx: { user: `${ctx.tenant}:7` } }));
const seen: string[] = [];
const router = t.router({
  create: withUser
    .use(async ({ next, path, type }) => {
      seen.push(`${type} ${path}`);
      return next();
    })
    .input(z.object({ name: z.string().min(1), age: z.number().int().default(30) }))
    .output(z.object({ who: z.string(), name: z.string(), age: z.number() }))
    .mutation(({ ctx, input }) => ({ who: `${ctx.tenant}/${ctx.user}`, name: input.name, age: input.age })),
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
});

type Path = keyof typeof router._def.procedures;

/** Both callers, on the same procedure and input: tRPC's own and the facade's. */
async function both(path: Path, type: 'query' | 'mutation', raw: unknown) {
  const opts = {
    ctx: { tenant: 't1' },
    path,
    type,
    input: undefined,
    getRawInput: async () => raw,
    signal: undefined,
    batchIndex: 0,
  };
  const settle = (p: Promise<unknown>) =>
    p.then(
      (data) => ({ data }),
      (error: unknown) => ({ error }),
    );
  const procedure = router._def.procedures[path] as AnyProcedure;
  return {
    trpc: await settle(callProcedure({ ...opts, router })),
    ours: await settle(procedureCall(procedure)(opts)),
  };
}

function errorOf(r: { data?: unknown; error?: unknown }): TRPCError {
  expect(r.error, `expected an error, got ${JSON.stringify(r.data)}`).to.be.instanceOf(TRPCError);
  return r.error as TRPCError;
}

describe("the REST facade's procedure caller (server/procedure-call.ts) against tRPC's own", () => {
  it('when a procedure adds to the context and parses its input, then both callers give the same data, running each middleware once', async () => {
    seen.length = 0;
    const { trpc, ours } = await both('create', 'mutation', { name: 'Ada' });
    expect(ours).to.deep.equal({ data: { who: 't1/t1:7', name: 'Ada', age: 30 } });
    expect(ours).to.deep.equal(trpc);
    expect(seen).to.deep.equal(['mutation create', 'mutation create']);
  });

  it('when the input is invalid, then both refuse it as BAD_REQUEST with the same message', async () => {
    const { trpc, ours } = await both('create', 'mutation', { name: '', extra: 1 });
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
    expect(errorOf(refused.ours).code).to.equal('FORBIDDEN');
    expect(errorOf(refused.ours).message).to.equal('not you');
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
});
