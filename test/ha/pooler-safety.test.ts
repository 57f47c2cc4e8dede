import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pg from 'pg';
import { QueryTypes, Sequelize } from 'sequelize';
import { checkSessionBounds, createSequelize } from '../../core/database.js';
import { scratchDatabase } from '../chaos/scratch-database.js';
import { startGatewaySlot } from '../support/gateway-slot.js';
import { type HttpResult, http } from '../support/http.js';
import { type Instance, spawnInstance, startInstance, untilReady } from '../support/processes.js';
import { bearer, idempotencyKey, tokenFor, uniqueTenant } from '../support/tokens.js';
import { PGBOUNCER, type PgBouncer, pgbouncerInstalled, startPgBouncer } from './pgbouncer.js';
import { sessionStateFindings, startWireRecorder, type WireRecorder } from './wire-recorder.js';

/**
 * What the service needs from its connections to stay safe behind a pooler in transaction mode or a
 * router that may point at a replica. The first suite runs on the test PostgreSQL directly: the wait
 * bounds are proven at start wherever they come from, the pool sets no session state, a read-only
 * database answers 503 with Retry-After, and start-up waits for a writable one. The second suite
 * (below) runs the same guarantees through a real PgBouncer in transaction mode.
 */
const BOUNDS = { waitMs: 700, leaseMs: 4000 };

function serverUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: the mocha root hooks did not run');
  return url;
}

async function sql(url: string, text: string): Promise<void> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

describe('pooler safety on PostgreSQL directly: bounds proven at start, no session state, read-only answered 503', function () {
  this.timeout(90000);

  it('when the connections lack the wait bounds (as PgBouncer leaves them), then start-up is refused naming each setting and the ALTER ROLE that fixes it; with them, it passes', async () => {
    const bare = new Sequelize(serverUrl(), { dialect: 'postgres', logging: false });
    try {
      let refused: Error | undefined;
      await checkSessionBounds(bare, BOUNDS).catch((err: Error) => {
        refused = err;
      });
      expect(refused?.message).to.match(/lock_timeout is off \(want 700 ms\)/);
      expect(refused?.message).to.match(/idle_in_transaction_session_timeout is off \(want 4000 ms\)/);
      expect(refused?.message).to.match(/ALTER ROLE "[^"]+" SET lock_timeout = '700ms';/);
    } finally {
      await bare.close();
    }
    const bounded = createSequelize(serverUrl(), 2, BOUNDS);
    try {
      await checkSessionBounds(bounded, BOUNDS);
    } finally {
      await bounded.close();
    }
  });

  it('when the role carries the bounds (deploy/ha does ALTER ROLE ... SET), then a connection without startup parameters passes the check', async () => {
    const role = `bounds_role_${process.pid}`;
    await sql(serverUrl(), `DROP ROLE IF EXISTS ${role}`);
    // With a password: the embedded PostgreSQL asks for one (the machine's server trusts loopback).
    await sql(serverUrl(), `CREATE ROLE ${role} LOGIN PASSWORD 'bounds-role-password'`);
    try {
      for (const [name, ms] of [
        ['lock_timeout', 700],
        ['idle_in_transaction_session_timeout', 4000],
        ['statement_timeout', 30000],
      ] as const)
        await sql(serverUrl(), `ALTER ROLE ${role} SET ${name} = '${ms}ms'`);
      const url = new URL(serverUrl());
      url.username = role;
      url.password = 'bounds-role-password';
      const viaRole = new Sequelize(url.toString(), { dialect: 'postgres', logging: false });
      try {
        await checkSessionBounds(viaRole, BOUNDS);
      } finally {
        await viaRole.close();
      }
    } finally {
      await sql(serverUrl(), `DROP ROLE IF EXISTS ${role}`);
    }
  });

  it("when the service's pool opens a connection, then it sets no session state (time zone, client_min_messages) that a pooler would hand to the next client", async () => {
    const s = createSequelize(serverUrl(), 1, BOUNDS);
    try {
      const rows = await s.query<{ name: string; source: string }>(
        `SELECT name, source FROM pg_settings WHERE source = 'session' ORDER BY name`,
        { type: QueryTypes.SELECT },
      );
      expect(rows.map((r) => r.name)).to.deep.equal([]);
    } finally {
      await s.close();
    }
  });

  it('when the database turns read-only under a running instance (the router points at a replica), then a create answers 503 with Retry-After, and the same key creates once it is writable again', async () => {
    const db = await scratchDatabase(serverUrl(), `readonly_${process.pid}`);
    const name = new URL(db.url).pathname.slice(1);
    const instance = await startInstance({ DATABASE_URL: db.url });
    const reconnect = () =>
      sql(
        serverUrl(),
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`,
      );
    try {
      await sql(serverUrl(), `ALTER DATABASE ${name} SET default_transaction_read_only = on`);
      await reconnect();
      const send = () =>
        fetch(`${instance.url}/api/v1/orders`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${tokenFor('ro', '1')}`,
            'content-type': 'application/json',
            'idempotency-key': 'read-only-key-0000000001',
          },
          body: JSON.stringify({ merchantOrderNo: 'ro-1', amount: '5.00' }),
        });
      let res = await send();
      // The first request after the connections were ended may meet a dead pooled connection: 503 too.
      for (let i = 0; i < 3 && res.status === 503; i++) res = await send();
      expect(res.status).to.equal(503);
      expect(res.headers.get('retry-after')).to.match(/^\d+$/);
      expect(((await res.json()) as { code: number }).code).to.equal(503);
      await sql(serverUrl(), `ALTER DATABASE ${name} SET default_transaction_read_only = off`);
      await reconnect();
      let again = await send();
      for (let i = 0; i < 5 && again.status === 503; i++) again = await send();
      expect(again.status).to.equal(201);
    } finally {
      instance.kill();
      await instance.exited;
      await db.drop();
    }
  });

  it('when an instance starts while the database is read-only, then it waits (saying so) instead of exiting, and becomes ready once the database takes writes', async () => {
    const db = await scratchDatabase(serverUrl(), `startwait_${process.pid}`);
    const name = new URL(db.url).pathname.slice(1);
    await sql(serverUrl(), `ALTER DATABASE ${name} SET default_transaction_read_only = on`);
    try {
      const instance = await spawnInstance({ DATABASE_URL: db.url, LOG_LEVEL: 'warn' });
      try {
        // The database turns writable only once the instance has said it waits (a fixed delay raced
        // the instance's own start-up on a loaded machine: the flip came first, and nothing waited).
        const deadline = Date.now() + 60000;
        while (!instance.output().includes('waiting for a writable database')) {
          if (Date.now() > deadline || instance.child.exitCode !== null) {
            throw new Error(
              `the instance never said it waits for a writable database:\n${instance.output()}`,
            );
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        // As a promotion would: the database takes writes (new sessions get the new default, so the
        // sessions already open are ended, as HAProxy ends them when the leader changes).
        await sql(serverUrl(), `ALTER DATABASE ${name} SET default_transaction_read_only = off`);
        await sql(
          serverUrl(),
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`,
        );
        await untilReady(instance);
        const ready = await fetch(`${instance.url}/readyz`);
        expect(ready.status).to.equal(200);
      } finally {
        instance.kill();
        await instance.exited;
      }
    } finally {
      await db.drop();
    }
  });
});

/** The suite's server over TCP (PgBouncer cannot use the embedded server's Unix socket URL). */
function tcpServer(url: string): { host: string; port: number } {
  const u = new URL(url);
  const viaSocket = u.searchParams.get('host')?.startsWith('/');
  const host = viaSocket || u.hostname === 'localhost' || !u.hostname ? '127.0.0.1' : u.hostname;
  return { host, port: Number(u.port || 5432) };
}

/** The process state letter from /proc (T: stopped by SIGSTOP). */
function processState(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] ?? '?';
  } catch {
    return '?';
  }
}

/**
 * The same guarantees through a real PgBouncer (transaction pool mode, its own configuration, a free
 * loopback port) in front of the suite's PostgreSQL, with a role that carries the wait bounds as
 * deploy/ha's does. Two client-visible databases on one scratch database: `one` has a single server
 * connection (so everything its clients did ran on it, and it can be inspected afterwards), `svc`
 * has four. Skipped, saying so, where pgbouncer is not installed.
 */
describe('pooler safety through a real PgBouncer in transaction mode', function () {
  this.timeout(120000);
  const WAIT_MS = 700;
  const LEASE_MS = 4000;
  const SLACK_MS = 1500;
  const suffix = `${process.pid}_${Date.now() % 100000}`;
  const APP = `pooler_app_${suffix}`;
  const BARE = `pooler_bare_${suffix}`;
  const DB = `pooler_db_${suffix}`;
  const PASSWORD = 'pooler-role-password';
  let bouncer: PgBouncer | undefined;
  const instances: Instance[] = [];

  const env = (url: string, extra: Record<string, string> = {}) => ({
    DATABASE_URL: url,
    IDEMPOTENCY_WAIT_MS: String(WAIT_MS),
    IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
    LOG_LEVEL: 'warn',
    ...extra,
  });
  const start = async (url: string, extra: Record<string, string> = {}) => {
    const instance = await startInstance(env(url, extra));
    instances.push(instance);
    return instance;
  };
  /** A database statement on the server itself (not through PgBouncer), as the suite's superuser. */
  const direct = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) => {
    const url = new URL(serverUrl());
    url.pathname = `/${DB}`;
    const client = new pg.Client(url.toString());
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  };
  /** A request; a 503 is retried a few times, as a client would (same key). */
  const send = async (
    baseUrl: string,
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: unknown,
  ): Promise<HttpResult> => {
    let res = await http(method, path, { baseUrl, headers, body });
    for (let i = 0; i < 10 && res.status === 503; i++) {
      await sleep(200);
      res = await http(method, path, { baseUrl, headers, body });
    }
    return res;
  };

  before(async function () {
    if (!pgbouncerInstalled()) {
      console.log(`      skipped: ${PGBOUNCER} not installed (apt-get install pgbouncer)`);
      this.skip();
    }
    await sql(serverUrl(), `CREATE ROLE ${APP} LOGIN PASSWORD '${PASSWORD}'`);
    await sql(serverUrl(), `CREATE ROLE ${BARE} LOGIN PASSWORD '${PASSWORD}'`);
    // What deploy/ha's cluster.ts does for the service's role: the role carries the wait bounds.
    await sql(serverUrl(), `ALTER ROLE ${APP} SET lock_timeout = '${WAIT_MS}ms'`);
    await sql(serverUrl(), `ALTER ROLE ${APP} SET idle_in_transaction_session_timeout = '${LEASE_MS}ms'`);
    await sql(serverUrl(), `ALTER ROLE ${APP} SET statement_timeout = '30000ms'`);
    await sql(serverUrl(), `CREATE DATABASE ${DB} OWNER ${APP}`);
    bouncer = await startPgBouncer({
      server: tcpServer(serverUrl()),
      databases: { one: { dbname: DB, poolSize: 1 }, svc: { dbname: DB, poolSize: 4 } },
      users: [
        { name: APP, password: PASSWORD },
        { name: BARE, password: PASSWORD },
      ],
      adminUser: APP,
      // A client waiting for a server connection (all busy) gets an error after the wait bound.
      queryWaitTimeoutMs: WAIT_MS,
    });
    // Migrations first, through `svc`: migrate() holds its advisory-lock transaction on one
    // connection while each migration file runs on another, which a one-connection pool cannot give.
    const migrating = await startInstance(env(bouncer.url('svc', APP)));
    expect(await migrating.stop()).to.equal(0);
  });

  after(async () => {
    for (const i of instances) {
      if (processState(i.pid) === 'T') process.kill(i.pid, 'SIGCONT');
      i.kill();
      await i.exited;
    }
    await bouncer?.stop();
    if (!pgbouncerInstalled()) return;
    await sql(serverUrl(), `DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
    await sql(serverUrl(), `DROP ROLE IF EXISTS ${APP}`);
    await sql(serverUrl(), `DROP ROLE IF EXISTS ${BARE}`);
  });

  it('when two clients use one PgBouncer server connection, then they share its backend (transaction pooling) and a session-level SET by one reaches the other: the reason the service must send none', async () => {
    if (!bouncer) throw new Error('no pgbouncer');
    const config = await bouncer.admin('SHOW CONFIG');
    expect(config.find((r) => r.key === 'pool_mode')?.value).to.equal('transaction');
    const a = new pg.Client(bouncer.url('one', APP));
    const b = new pg.Client(bouncer.url('one', APP));
    await a.connect();
    await b.connect();
    try {
      const pidA = (await a.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const pidB = (await b.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      expect(pidB).to.equal(pidA);
      await a.query("SET lock_timeout = '5s'");
      expect((await b.query('SHOW lock_timeout')).rows[0].lock_timeout).to.equal('5s');
      // SET LOCAL, by contrast, ends with its transaction.
      await a.query('RESET lock_timeout');
      await a.query("BEGIN; SET LOCAL lock_timeout = '6s'; COMMIT");
      const after = await b.query("SELECT setting, source FROM pg_settings WHERE name = 'lock_timeout'");
      expect(after.rows[0]).to.deep.equal({ setting: String(WAIT_MS), source: 'user' });
    } finally {
      await a.end();
      await b.end();
    }
  });

  it("when the service's pool connects through PgBouncer, then its startup-parameter bounds are dropped: the role's bounds are what its sessions have (checked at start), and a role without them is refused naming the ALTER ROLE", async () => {
    if (!bouncer) throw new Error('no pgbouncer');
    const bounds = { waitMs: WAIT_MS, leaseMs: LEASE_MS };
    // createSequelize sends lock_timeout etc. as startup parameters; PgBouncer drops them.
    const bare = createSequelize(bouncer.url('svc', BARE), 1, bounds);
    try {
      const [row] = await bare.query<{ lock_timeout: string }>('SHOW lock_timeout', {
        type: QueryTypes.SELECT,
      });
      expect(row.lock_timeout, 'the startup parameter did not reach the server').to.equal('0');
      let refused: Error | undefined;
      await checkSessionBounds(bare, bounds).catch((err: Error) => {
        refused = err;
      });
      expect(refused?.message).to.match(/lock_timeout is off \(want 700 ms\)/);
      expect(refused?.message).to.include(`ALTER ROLE "${BARE}" SET lock_timeout = '700ms';`);
    } finally {
      await bare.close();
    }
    const app = createSequelize(bouncer.url('svc', APP), 2, bounds);
    try {
      await checkSessionBounds(app, bounds);
      const rows = await app.query<{ name: string; setting: string; source: string }>(
        `SELECT name, setting, source FROM pg_settings
          WHERE name IN ('lock_timeout', 'statement_timeout', 'idle_in_transaction_session_timeout') ORDER BY name`,
        { type: QueryTypes.SELECT },
      );
      expect(rows).to.deep.equal([
        { name: 'idle_in_transaction_session_timeout', setting: String(LEASE_MS), source: 'user' },
        { name: 'lock_timeout', setting: String(WAIT_MS), source: 'user' },
        { name: 'statement_timeout', setting: '30000', source: 'user' },
      ]);
    } finally {
      await app.close();
    }
  });

  it('when an instance serves creates, replays, conflicts and payments through PgBouncer, then its statements leave no session state (no session SET, SET LOCAL only inside transactions, no named prepared statement), and the one server connection they all ran on shows none afterwards', async () => {
    if (!bouncer) throw new Error('no pgbouncer');
    let recorder: WireRecorder | undefined = await startWireRecorder({
      host: '127.0.0.1',
      port: bouncer.port,
    });
    try {
      const url = `postgres://${APP}@127.0.0.1:${recorder.port}/one`;
      const instance = await start(url);
      const tenant = uniqueTenant('pgb');
      const user = bearer(tenant, '1');
      const admin = bearer(tenant, '2', 'admin');
      const k1 = idempotencyKey();
      const order = { merchantOrderNo: 'pgb-1', amount: '10.00' };
      const created = await send(
        instance.url,
        'POST',
        '/api/v1/orders',
        { ...user, 'Idempotency-Key': k1 },
        order,
      );
      expect(created.status, created.text).to.equal(201);
      const replay = await send(
        instance.url,
        'POST',
        '/api/v1/orders',
        { ...user, 'Idempotency-Key': k1 },
        order,
      );
      expect(replay.status).to.equal(201);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      const mismatch = await send(
        instance.url,
        'POST',
        '/api/v1/orders',
        { ...user, 'Idempotency-Key': k1 },
        { ...order, amount: '11.00' },
      );
      expect(mismatch.status).to.equal(409);
      const taken = await send(
        instance.url,
        'POST',
        '/api/v1/orders',
        { ...user, 'Idempotency-Key': idempotencyKey() },
        order,
      );
      expect(taken.status).to.equal(409);
      const k2 = idempotencyKey();
      const paid = await send(
        instance.url,
        'POST',
        '/api/v1/payments',
        { ...user, 'Idempotency-Key': k2 },
        order,
      );
      expect(paid.status, paid.text).to.equal(201);
      expect(paid.body.data.status).to.equal('SUCCEEDED');
      const again = await send(
        instance.url,
        'POST',
        '/api/v1/payments',
        { ...user, 'Idempotency-Key': idempotencyKey() },
        order,
      );
      expect(again.status).to.equal(201);
      expect(again.body.data.paymentNo).to.equal(paid.body.data.paymentNo);
      const read = await send(instance.url, 'GET', `/api/v1/orders/${created.body.data.id}`, user);
      expect(read.status).to.equal(200);
      expect(read.body.data.status).to.equal('PAID');
      const made = await send(instance.url, 'POST', '/api/v1/users', admin, { name: 'Pooled', age: 30 });
      expect(made.status, made.text).to.equal(201);
      expect(await instance.stop()).to.equal(0);

      const messages = recorder.messages;
      const findings = messages.flatMap(sessionStateFindings);
      expect(findings, findings.join('\n')).to.deep.equal([]);
      const parses = messages.filter((m) => m.kind === 'parse');
      const setLocal = messages.filter((m) => /(^|;)\s*SET\s+LOCAL\b/i.test(m.text));
      expect(parses.length, 'parameterised statements (extended protocol) were seen').to.be.greaterThan(5);
      expect(setLocal.length, 'the claim sets its lock_timeout with SET LOCAL').to.be.greaterThan(0);
      console.log(
        `      recorded ${messages.length} messages on ${new Set(messages.map((m) => m.connection)).size} client connections: ${messages.length - parses.length} simple queries, ${parses.length} Parse (all unnamed), ${setLocal.length} with SET LOCAL (each inside a transaction); no session-level SET, PREPARE, LISTEN, cursor WITH HOLD, temporary table or session advisory lock`,
      );
      await recorder.close();
      recorder = undefined;

      // The one server connection of `one` ran every statement above; it holds nothing now.
      const servers = (await bouncer.admin('SHOW SERVERS')).filter((r) => r.database === 'one');
      expect(servers, 'one server connection for `one`').to.have.length(1);
      const c = new pg.Client(bouncer.url('one', APP));
      await c.connect();
      try {
        const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        expect(String(pid)).to.equal(String(servers[0].remote_pid));
        expect((await c.query('SELECT name, statement FROM pg_prepared_statements')).rows).to.deep.equal([]);
        const session = (await c.query("SELECT name FROM pg_settings WHERE source = 'session' ORDER BY name"))
          .rows;
        // application_name is PgBouncer's own: it sets each client's value when it lends the connection.
        expect(session.map((r) => r.name).filter((n) => n !== 'application_name')).to.deep.equal([]);
        expect((await c.query('SHOW lock_timeout')).rows[0].lock_timeout).to.equal(`${WAIT_MS}ms`);
        expect((await c.query('SELECT count(*)::int AS n FROM pg_cursors')).rows[0].n).to.equal(0);
        expect(
          (
            await c.query(
              "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
            )
          ).rows[0].n,
        ).to.equal(0);
      } finally {
        await c.end();
      }
    } finally {
      await recorder?.close();
    }
  });

  it("when a stalled instance holds locks and the only server connection of its PgBouncer pool, then other requests still end within the wait bound (202 or 503 with Retry-After: the lock wait by lock_timeout, the wait for a server connection by query_wait_timeout), and the stalled transaction is ended by the role's idle_in_transaction_session_timeout", async () => {
    if (!bouncer) throw new Error('no pgbouncer');
    const frozen = await start(bouncer.url('one', APP), { FAILPOINTS: 'local.after-write=sigstop@1' });
    const other = await start(bouncer.url('svc', APP));
    const sameFrozenPool = await start(bouncer.url('one', APP));
    const tenant = uniqueTenant('pgbwait');
    const user = bearer(tenant, '1');
    const key = idempotencyKey();
    const order = { merchantOrderNo: 'pgb-wait', amount: '3.00' };
    const abandoned = new AbortController();
    const first = fetch(`${frozen.url}/api/v1/orders`, {
      method: 'POST',
      headers: { ...user, 'Idempotency-Key': key, 'content-type': 'application/json' },
      body: JSON.stringify(order),
      signal: abandoned.signal,
    }).catch(() => undefined);
    try {
      const deadline = Date.now() + 10000;
      while (processState(frozen.pid) !== 'T' && Date.now() < deadline) await sleep(20);
      expect(processState(frozen.pid), 'the instance froze inside its transaction').to.equal('T');
      const frozenAt = Date.now();
      const timed = async (baseUrl: string, headers: Record<string, string>, body: unknown) => {
        const t0 = Date.now();
        const res = await http('POST', '/api/v1/orders', { baseUrl, headers, body });
        return { res, ms: Date.now() - t0 };
      };
      // The same key on another instance: waits on the first one's locks for at most the bound.
      const dup = await timed(other.url, { ...user, 'Idempotency-Key': key }, order);
      expect(dup.res.status, dup.res.text).to.be.oneOf([202, 503]);
      expect(dup.res.headers.get('retry-after')).to.match(/^\d+$/);
      expect(dup.ms).to.be.lessThan(WAIT_MS + SLACK_MS);
      // Another key for the same merchantOrderNo: waits on the order's unique index entry.
      const rival = await timed(other.url, { ...user, 'Idempotency-Key': idempotencyKey() }, order);
      expect(rival.res.status, rival.res.text).to.equal(503);
      expect(rival.res.headers.get('retry-after')).to.match(/^\d+$/);
      expect(rival.ms).to.be.lessThan(WAIT_MS + SLACK_MS);
      // Unrelated work on the pool whose one server connection the frozen transaction holds:
      // PgBouncer's queue, bounded by query_wait_timeout, answered 503.
      const queued = await timed(
        sameFrozenPool.url,
        { ...user, 'Idempotency-Key': idempotencyKey() },
        { merchantOrderNo: 'pgb-elsewhere', amount: '1.00' },
      );
      expect(queued.res.status, queued.res.text).to.equal(503);
      expect(queued.res.headers.get('retry-after')).to.match(/^\d+$/);
      expect(queued.ms).to.be.lessThan(WAIT_MS + SLACK_MS);
      console.log(
        `      frozen transaction: same key ${dup.res.status} after ${dup.ms} ms, rival key 503 after ${rival.ms} ms, queued for its pool 503 after ${queued.ms} ms (bound ${WAIT_MS} ms)`,
      );
      // The server ends the frozen transaction after the role's idle_in_transaction_session_timeout;
      // the key then executes on the other instance, once, and the frozen pool serves again.
      let done: HttpResult | undefined;
      while (Date.now() - frozenAt < LEASE_MS + 10000) {
        done = await http('POST', '/api/v1/orders', {
          baseUrl: other.url,
          headers: { ...user, 'Idempotency-Key': key },
          body: order,
        });
        if (done.status === 201) break;
        await sleep(250);
      }
      expect(done?.status, done?.text).to.equal(201);
      expect(Date.now() - frozenAt).to.be.greaterThan(LEASE_MS - 500);
      const served = await send(
        sameFrozenPool.url,
        'POST',
        '/api/v1/orders',
        { ...user, 'Idempotency-Key': idempotencyKey() },
        { merchantOrderNo: 'pgb-after', amount: '1.00' },
      );
      expect(served.status, served.text).to.equal(201);
      const rows = await direct<{ n: number }>(
        'SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1 AND merchant_order_no = $2',
        [tenant, order.merchantOrderNo],
      );
      expect(rows[0].n).to.equal(1);
    } finally {
      if (processState(frozen.pid) === 'T') process.kill(frozen.pid, 'SIGCONT');
      frozen.kill();
      abandoned.abort();
      await first;
    }
  });

  it("when a create's and a payment's transaction lose their server connection right before COMMIT (PgBouncer then fails the COMMIT, or has already ended the client's connection), then the create answers 503 with Retry-After, nothing kept, and its retry with the same key commits once; the payment looks again (its COMMIT might have committed), finds nothing kept and is claimed anew: 201, charged once", async () => {
    if (!bouncer) throw new Error('no pgbouncer');
    const gateway = await startGatewaySlot();
    const recorder = await startWireRecorder({ host: '127.0.0.1', port: bouncer.port });
    /**
     * Connections that ended inside a transaction (no ReadyForQuery back to idle): the transaction
     * was cut and its COMMIT failed, whether it was already on the wire (PgBouncer answers "server
     * conn crashed?") or not yet sent (PgBouncer had already closed the client's connection).
     */
    const cutInTransaction = async (atLeast: number) => {
      const count = () => recorder.closed.filter((c) => c.status === 'T').length;
      // The relay may see the connection's end a moment after the instance answered.
      for (let i = 0; i < 40 && count() < atLeast; i++) await sleep(50);
      return count();
    };
    const commitsOnCutConnections = () =>
      recorder.closed.filter((c) => {
        const last = recorder.messages.filter((m) => m.connection === c.connection).at(-1);
        return c.status === 'T' && last !== undefined && /COMMIT\s*;?\s*$/i.test(last.text);
      }).length;
    try {
      // `drop`: the server ends every connection of the instance right before that round trip.
      const instance = await start(`postgres://${APP}@127.0.0.1:${recorder.port}/svc`, {
        FAILPOINTS: 'local.before-commit=drop@1;payment.tx1.before-commit=drop@1',
        PAYMENT_GATEWAY_URL: gateway.url,
      });
      const tenant = uniqueTenant('pgbcommit');
      const user = bearer(tenant, '1');
      const order = { merchantOrderNo: 'pgb-commit', amount: '7.50' };
      const orderKey = { ...user, 'Idempotency-Key': idempotencyKey() };
      const cut = await http('POST', '/api/v1/orders', {
        baseUrl: instance.url,
        headers: orderKey,
        body: order,
      });
      expect(cut.status, cut.text).to.equal(503);
      expect(cut.headers.get('retry-after')).to.match(/^\d+$/);
      const cutOrders = await cutInTransaction(1);
      expect(cutOrders, 'the connection ended inside the transaction').to.be.greaterThan(0);
      const count = async (table: 'orders' | 'payments') =>
        (
          await direct<{ n: number }>(
            `SELECT count(*)::int AS n FROM ${table} WHERE ${table === 'orders' ? 'tenant_id' : 'merchant_id'} = $1`,
            [tenant],
          )
        )[0].n;
      expect(await count('orders')).to.equal(0);
      const created = await send(instance.url, 'POST', '/api/v1/orders', orderKey, order);
      expect(created.status, created.text).to.equal(201);
      expect(await count('orders')).to.equal(1);

      const payKey = { ...user, 'Idempotency-Key': idempotencyKey() };
      // A failed COMMIT of Tx 1 might have committed: the request looks again before it answers.
      const paid = await http('POST', '/api/v1/payments', {
        baseUrl: instance.url,
        headers: payKey,
        body: order,
      });
      expect(paid.status, paid.text).to.equal(201);
      expect(paid.body.data.status).to.equal('SUCCEEDED');
      expect(await cutInTransaction(cutOrders + 1), "the payment's Tx 1 was cut too").to.be.greaterThan(
        cutOrders,
      );
      const charges = (await gateway.ledger()).charges;
      expect(charges.map((c) => c.paymentNo)).to.deep.equal([paid.body.data.paymentNo]);
      expect(await count('payments')).to.equal(1);
      const log = await bouncer.log();
      console.log(
        `      ${recorder.closed.filter((c) => c.status === 'T').length} connections cut inside a transaction, ${commitsOnCutConnections()} of them after the COMMIT was sent; PgBouncer's log: ${[...new Set(log.match(/closing because: [^(\n]*/g) ?? [])].join('; ')}`,
      );
    } finally {
      await recorder.close();
      await gateway.close();
    }
  });
});
