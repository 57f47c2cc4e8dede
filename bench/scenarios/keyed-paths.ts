import { randomUUID } from 'node:crypto';
import { RECENT_KEYS_MAX } from '../../idempotency/recent-keys.js';
import type { BenchRun } from '../bench-run.js';
import type { LoadRequest } from '../load.js';
import { interleaved, loadRow, type Spec, seedKeys, sendAll } from '../measure.js';
import { ask, type Child } from '../processes.js';
import { r2, ratio } from '../report.js';

/**
 * What each branch of a keyed create still buys (issue 26; routers/keyed-path.ts chooseKeyedPath):
 * the same requests through the branch the service chooses and through the one it takes without it,
 * interleaved in rounds. Every arm is checked to take its path (the statements one request sends).
 *
 * - A new key: users.create by an admin whose row exists. 'one-statement' (the default) against
 *   'read-first', forced by a failpoint between claim and commit that is armed but never
 *   fires (`local.after-claim=stall(0)%0` over PUT /__failpoints: the one statement is not taken
 *   while one is armed), and against 'general' (the same row's token saying role user: the write
 *   cannot check an admin-only create's role, so authentication reads the row first).
 * - A replay: keys a process answered lately ('replay-read-first') against keys it has not
 *   ('one-statement', as a retry that reaches another instance). Each arm has an instance of its own
 *   (RecentKeys is per process, first in first out): instance B replays a few keys over and over,
 *   instance C replays more keys than RecentKeys holds, in turn, so that each is gone before it comes
 *   round again. The keys are created on the main instance.
 */
export async function keyedPathsScenario(ctx: BenchRun): Promise<void> {
  const { P, ROUNDS, SEGMENT, log, rows, results, server } = ctx;
  const setFailpoints = (spec: string) => async () => {
    const res = await fetch(`${server.url}/__failpoints`, { method: 'PUT', body: spec });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`PUT /__failpoints ${spec}: ${res.status}`);
  };
  // Admins with a row (created through the API), each with an admin and a user token.
  const promoted = await createAdmins(ctx, 16);
  const asAdmin = promoted.map((id) => ctx.token(Number(id), 'admin'));
  const asUser = promoted.map((id) => ctx.token(Number(id), 'user'));
  let seq = 0;
  const newUser = (tokens: string[]) => (): LoadRequest => ({
    method: 'POST',
    path: '/api/v1/users',
    headers: { authorization: tokens[seq++ % tokens.length], 'idempotency-key': randomUUID() },
    body: ctx.userBody,
  });
  const fewKeys = ctx.newReplayKeys(P.replayKeys);
  const manyKeys = ctx.newReplayKeys(RECENT_KEYS_MAX + 2000);
  log(`keyed-paths: seeding ${fewKeys.length} + ${manyKeys.length} keys; two more instances`);
  await seedKeys(ctx, server.url, [...fewKeys, ...manyKeys]);
  const [b, c] = await Promise.all([ctx.launchService('service-b'), ctx.launchService('service-c')]);
  // Each answers its keys once before it is measured (JIT warm-up): B's are then in its RecentKeys;
  // C's are more than it holds, so each is gone again when the cycle comes back to it.
  await sendAll(b.url, fewKeys.map(ctx.replayRequest), ctx.CONNECTIONS);
  await sendAll(c.url, manyKeys.map(ctx.replayRequest), ctx.CONNECTIONS);
  const cycle = (keys: typeof fewKeys) => {
    let i = 0;
    return () => ctx.replayRequest(keys[i++ % keys.length]);
  };
  const replayFew = cycle(fewKeys);
  const replayMany = cycle(manyKeys);
  let notReplayed = 0;
  const inspect = (status: number, headers: Record<string, string | string[]>) => {
    if (status === 201 && headers['idempotent-replayed'] !== 'true') notReplayed += 1;
  };
  const clear = setFailpoints('');
  const armed = setFailpoints('local.after-claim=stall(0)%0');
  const specs: Spec[] = [
    { name: 'path-new-one-statement', url: server.url, next: newUser(asAdmin), before: clear },
    {
      name: 'path-new-read-first',
      url: server.url,
      next: newUser(asAdmin),
      before: armed,
    },
    { name: 'path-new-general', url: server.url, next: newUser(asUser), before: clear },
    { name: 'path-replay-read-first', url: b.url, next: replayFew, pid: b.pid, inspect },
    { name: 'path-replay-one-statement', url: c.url, next: replayMany, pid: c.pid, inspect },
  ];
  let r: Awaited<ReturnType<typeof interleaved>>;
  try {
    log(`keyed-paths: ${specs.map((s) => s.name).join(', ')}; ${ROUNDS} rounds of ${SEGMENT}s each`);
    r = await interleaved(ctx, specs, ROUNDS, SEGMENT);
    // Each arm took its path: the statements of a few requests of it, counted by the probe.
    await clear();
    const oneStatement = await statementsOf(server, newUser(asAdmin), 'idem_execute', 'idem_auth_read');
    const general = await statementsOf(server, newUser(asUser), 'idem_auth_read', 'idem_execute');
    await armed();
    const readFirst = await statementsOf(server, newUser(asAdmin), 'idem_auth_read', 'idem_execute');
    results.keyedPaths = {
      notReplayed,
      statements: {
        'one-statement': oneStatement,
        'read-first': readFirst,
        general,
        'replay read-first': await statementsOf(b, replayFew, 'idem_auth_read', 'idem_execute'),
        'replay one-statement': await statementsOf(c, replayMany, 'idem_execute', 'idem_auth_read'),
      },
    };
  } finally {
    await clear();
    await Promise.all([b.stop(), c.stop()]);
  }
  const report = (id: string, scenario: string, arm: string, against: string, target: string) =>
    rows.push(loadRow(id, scenario, r[arm], r2(ratio(r[arm].rps, r[against].rps)), target));
  report(
    'path-new-one-statement',
    'Keyed create, new key: the one statement ÷ read-first',
    'path-new-one-statement',
    'path-new-read-first',
    'reported',
  );
  report(
    'path-new-general',
    'Keyed create, new key: general (role read first) ÷ the one statement',
    'path-new-general',
    'path-new-one-statement',
    'reported',
  );
  const extra = notReplayed ? ` (${notReplayed} executed again!)` : '';
  rows.push(
    loadRow(
      'path-replay-read-first',
      'Replay: read-first ÷ the one statement',
      r['path-replay-read-first'],
      r2(ratio(r['path-replay-read-first'].rps, r['path-replay-one-statement'].rps)) + extra,
      'reported, none executed',
      notReplayed === 0,
    ),
  );
}

/** Creates `n` users with the admin role through the API; their ids. */
async function createAdmins(ctx: BenchRun, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${ctx.server.url}/api/v1/users`, {
      method: 'POST',
      headers: { authorization: ctx.admins[i], 'content-type': 'application/json' },
      body: JSON.stringify({ name: `Bench Admin ${i}`, age: 40, role: 'admin' }),
    });
    const body = (await res.json()) as { data?: { id?: string } };
    if (res.status !== 201 || !body.data?.id) throw new Error(`keyed-paths: admin create ${res.status}`);
    ids.push(body.data.id);
  }
  return ids;
}

/**
 * The statements 5 requests of an arm send, counted by the instance's probe; throws unless every
 * request sent `must` and none sent `mustNot` (the arm would measure another path).
 */
async function statementsOf(
  instance: Child,
  next: () => LoadRequest,
  must: string,
  mustNot: string,
): Promise<Array<[string, number]>> {
  const n = 5;
  await ask(instance.child, { type: 'count-start' }, 'count-started');
  await sendAll(
    instance.url,
    Array.from({ length: n }, () => next()),
    1,
  );
  const got = await ask<{ texts: Array<[string, number]> }>(instance.child, { type: 'count-stop' }, 'counts');
  const calls = (name: string) =>
    got.texts.filter(([text]) => text.includes(name)).reduce((a, [, c]) => a + c, 0);
  if (calls(must) < n || calls(mustNot) > 0)
    throw new Error(`keyed-paths: expected ${must} and no ${mustNot}, got ${JSON.stringify(got.texts)}`);
  return got.texts;
}
