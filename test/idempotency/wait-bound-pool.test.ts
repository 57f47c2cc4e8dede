// CONTRACT section 5: "No request waits longer than IDEMPOTENCY_WAIT_MS for another request's work,
// whatever holds it (… a busy connection pool)". The bound runs from the request's arrival: a
// duplicate that first waited for a pooled connection has only the rest of it for the key's lock.
// Before, the bound started again after the auth read, so a duplicate that had waited for the pool
// waited a whole bound more on the lock (an outside audit: 19 duplicates of a stalled create on a
// pool of 10, answers after 2.03–2.04 s with a bound of 1 s).
//
// The instance has a pool of 2. The first request holds one connection and the key's lock, stalled
// before its COMMIT for STALL_MS. D1 takes the other connection and waits on the lock; D2, sent
// AHEAD_MS later, waits for a connection until D1's bound ends (202), then claims. The first commits
// between the two readings: with the bound counted from D2's arrival, D2 waits at most AHEAD_MS on
// the lock and gets 202 before the commit; counted from after its wait for the pool, it would wait
// until the commit and replay the 201. The answer tells them apart; no duration is asserted.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

const BOUND_MS = 4000;
const STALL_MS = 7000;
const AHEAD_MS = 1000;

describe('wait bound: counted from the request, a wait for a pooled connection included', function () {
  this.timeout(90000);
  let db: IsolatedDatabase;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('waitpool');
    instance = await startInstance({
      DATABASE_URL: db.url,
      DB_POOL_MAX: '2',
      IDEMPOTENCY_WAIT_MS: String(BOUND_MS),
      RECOVERER_INTERVAL_MS: '600000',
      PURGE_INTERVAL_MS: '600000',
      FAILPOINTS_CONTROL: '1',
    });
  });
  after(async () => {
    await instance?.stop();
    await db?.drop();
  });

  /** Advisory-lock waits in the instance's database: a claim waiting on the key. */
  const waitingClaims = async () =>
    (
      await db.sequelize.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
          WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`,
        { type: 'SELECT' as never },
      )
    )[0].n;

  it('when a duplicate waited for a pooled connection, then it waits on the key only for the rest of its bound and gets 202, not the first answer it would have waited for', async () => {
    const auth = bearer(uniqueTenant('wp'), '870000501');
    const key = idempotencyKey();
    const send = () =>
      http('POST', '/api/v1/orders', {
        baseUrl: instance.url,
        headers: { ...auth, 'Idempotency-Key': key },
        body: { merchantOrderNo: 'wp-1', amount: '3.00' },
      });
    // The user's first keyed create makes its slot rows, outside the stalled transaction.
    const warm = await http('POST', '/api/v1/orders', {
      baseUrl: instance.url,
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'wp-0', amount: '3.00' },
    });
    expect(warm.status, warm.text).to.equal(201);

    const armed = await fetch(`${instance.url}/__failpoints`, {
      method: 'PUT',
      body: `local.before-commit=stall(${STALL_MS})@1`,
    });
    expect(armed.status).to.equal(204);
    const first = send();
    const deadline = Date.now() + 20000;
    while (!instance.output().includes('failpoint local.before-commit fired') && Date.now() < deadline)
      await sleep(20);
    expect(instance.output()).to.include('failpoint local.before-commit fired');

    const d1 = send();
    while (Number(await waitingClaims()) < 1 && Date.now() < deadline) await sleep(20);
    expect(Number(await waitingClaims()), 'D1 waits on the key').to.equal(1);
    // D2 arrives while both connections are taken (the first's and D1's).
    await sleep(AHEAD_MS);
    const d2 = send();

    const [a, b, c] = await Promise.all([first, d1, d2]);
    expect(a.status, a.text).to.equal(201);
    expect(b.status, `D1: ${b.text}`).to.equal(202);
    expect(c.status, `D2: ${c.text}`).to.equal(202);
    expect(c.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
    // And the key's answer is the first one once it committed.
    const replay = await send();
    expect(replay.status, replay.text).to.equal(201);
    expect(replay.body.data.id).to.equal(a.body.data.id);
  });
});
