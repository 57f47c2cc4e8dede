import { expect } from 'chai';
import { sqlRows } from '../../core/sql.js';
import { EXPORT_PART_ROWS as PART_ROWS } from '../../routers/exports/export-run.js';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import { csvObjects, insertOrders, ordersOf, startExport, untilFinal } from './support.js';

const ROWS = 200_000;
const OTHER_ROWS = 3_000;
// A worker dies right after committing its KILL_AFTER-th part (core/failpoints.ts).
const KILL_AFTER = 8;
// A short lease, so the next instance takes over soon after a death; the sweep looks every 300 ms.
const ENV = { IDEMPOTENCY_LEASE_MS: '2000', RECOVERER_INTERVAL_MS: '300' };
const USER = '920000001';
const OTHER = '920000002';

async function checkpoint(db: IsolatedDatabase, id: string) {
  const [row] = await sqlRows<{ status: string; parts: number; rows: string }>(
    db.sequelize,
    'SELECT status, parts_written AS parts, rows_written::text AS rows FROM exports WHERE id = $1',
    [id],
  );
  return row;
}

/** Waits for the instance to die, and checks it died of the failpoint's SIGKILL (not of something else). */
async function diedOfFailpoint(instance: Instance): Promise<void> {
  const code = await instance.exited;
  expect(code, instance.output()).to.equal(null);
  expect(instance.child.signalCode).to.equal('SIGKILL');
  expect(instance.output()).to.include('failpoint export.part.after fired: sigkill');
}

describe('exports: a 200,000-row export whose worker is SIGKILLed twice is continued from its last part, every row exactly once', function () {
  this.timeout(300_000);
  let db: IsolatedDatabase;
  const instances: Instance[] = [];

  before(async () => {
    db = await createIsolatedDatabase('exports');
  });
  // Each test's instances end with it: one left running would take the next test's export job
  // (they share the database and its job queue) from the instance the test means to crash or freeze.
  afterEach(async () => {
    for (const i of instances) i.kill();
    await Promise.all(instances.map((i) => i.exited));
    instances.length = 0;
  });
  after(async () => {
    await db?.drop();
  });

  async function start(env: Record<string, string>): Promise<Instance> {
    const instance = await startInstance({ DATABASE_URL: db.url, ...ENV, ...env });
    instances.push(instance);
    return instance;
  }

  it('when instance 1 dies after part 8 and instance 2 after its 8th, then instance 3 finishes, and the file equals the direct query row for row (only the user’s own rows)', async () => {
    const killer = { FAILPOINTS: `export.part.after=sigkill@${KILL_AFTER}` };
    const first = await start(killer);
    const tenant = uniqueTenant('crash-exp');
    await insertOrders(db.sequelize, { tenant, userId: USER, count: ROWS, prefix: 'u' });
    await insertOrders(db.sequelize, { tenant, userId: OTHER, count: OTHER_ROWS, prefix: 'o' });
    const auth = bearer(tenant, USER);

    const started = await startExport(auth, { resource: 'orders' }, { baseUrl: first.url });
    expect(started.status, started.text).to.equal(202);
    const id: string = started.body.data.resourceId;

    // Only one instance runs at a time, so each death leaves a checkpoint known exactly.
    await diedOfFailpoint(first);
    expect(await checkpoint(db, id)).to.deep.equal({
      status: 'PROCESSING',
      parts: KILL_AFTER,
      rows: String(KILL_AFTER * PART_ROWS),
    });
    const second = await start(killer);
    await diedOfFailpoint(second);
    expect(await checkpoint(db, id)).to.deep.equal({
      status: 'PROCESSING',
      parts: 2 * KILL_AFTER,
      rows: String(2 * KILL_AFTER * PART_ROWS),
    });

    const third = await start({});
    const final = await untilFinal(auth, id, { baseUrl: third.url, withinMs: 240_000 });
    expect(final).to.deep.include({ status: 'SUCCEEDED', rowCount: ROWS });
    const file = await http('GET', `/api/v1/exports/${id}/file`, { baseUrl: third.url, headers: auth });
    expect(file.status).to.equal(200);
    expect(Buffer.byteLength(file.text)).to.equal(final.bytes);
    const exported = csvObjects(file.text);
    const ids = exported.map((r) => r.id);
    expect(new Set(ids).size, 'no row twice').to.equal(ids.length);
    const expected = await ordersOf(db.sequelize, tenant, USER);
    expect(expected).to.have.length(ROWS);
    expect(exported.length).to.equal(expected.length);
    // Row for row (compared in slices: a failure names the first differing region, not 200,000 rows).
    for (let i = 0; i < expected.length; i += 10_000) {
      expect(exported.slice(i, i + 10_000), `rows ${i}..`).to.deep.equal(expected.slice(i, i + 10_000));
    }
    const [{ parts }] = await sqlRows<{ parts: number }>(
      db.sequelize,
      'SELECT count(*)::int AS parts FROM export_parts WHERE export_id = $1',
      [id],
    );
    expect(parts).to.equal(ROWS / PART_ROWS);
  });

  it('when a worker freezes (SIGSTOP) and another takes over after its lease, then the frozen one, resumed, writes nothing (fenced) and the file is still every row once', async () => {
    const frozen = await start({ FAILPOINTS: 'export.part.after=sigstop@3', LOG_LEVEL: 'warn' });
    const tenant = uniqueTenant('stop-exp');
    await insertOrders(db.sequelize, { tenant, userId: USER, count: 20_000, prefix: 's' });
    const auth = bearer(tenant, USER);
    const started = await startExport(
      auth,
      { resource: 'orders', format: 'ndjson' },
      { baseUrl: frozen.url },
    );
    expect(started.status, started.text).to.equal(202);
    const id: string = started.body.data.resourceId;
    const deadline = Date.now() + 120_000;
    while (!frozen.output().includes('failpoint export.part.after fired: sigstop')) {
      if (Date.now() > deadline) throw new Error(`the worker never froze:\n${frozen.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await checkpoint(db, id)).parts).to.equal(3);
    const successor = await start({});
    const final = await untilFinal(auth, id, { baseUrl: successor.url, withinMs: 120_000 });
    expect(final).to.deep.include({ status: 'SUCCEEDED', rowCount: 20_000 });
    process.kill(frozen.pid, 'SIGCONT');
    // Resumed, it reads its next batch and tries to write it under its old owner token: refused.
    const until = Date.now() + 60_000;
    while (!frozen.output().includes('taken over by another worker; stopped')) {
      if (Date.now() > until)
        throw new Error(`the resumed worker did not stop as fenced:\n${frozen.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const file = await http('GET', `/api/v1/exports/${id}/file`, { baseUrl: successor.url, headers: auth });
    const lines = file.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).to.deep.equal(await ordersOf(db.sequelize, tenant, USER));
    const [{ parts }] = await sqlRows<{ parts: number }>(
      db.sequelize,
      'SELECT count(*)::int AS parts FROM export_parts WHERE export_id = $1',
      [id],
    );
    expect(parts).to.equal(20_000 / PART_ROWS);
  });

  it('when an export was committed but its job never added (a crash between the two), then the sweep starts it and it finishes', async () => {
    const instance = await start({});
    const tenant = uniqueTenant('lost-exp');
    await insertOrders(db.sequelize, { tenant, userId: USER, count: 2_500, prefix: 'l' });
    // The POST's transaction as it commits, without the add that follows it.
    const [row] = await sqlRows<{ id: string }>(
      db.sequelize,
      `INSERT INTO exports (tenant_id, user_id, all_users, resource, format, snapshot_at)
       VALUES ($1, $2, false, 'orders', 'csv', now()) RETURNING id::text AS id`,
      [tenant, USER],
    );
    const auth = bearer(tenant, USER);
    const final = await untilFinal(auth, row.id, { baseUrl: instance.url, withinMs: 120_000 });
    expect(final).to.deep.include({ status: 'SUCCEEDED', rowCount: 2_500 });
    const file = await http('GET', `/api/v1/exports/${row.id}/file`, {
      baseUrl: instance.url,
      headers: auth,
    });
    expect(csvObjects(file.text)).to.deep.equal(await ordersOf(db.sequelize, tenant, USER));
  });
});
