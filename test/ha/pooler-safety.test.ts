import { expect } from 'chai';
import pg from 'pg';
import { QueryTypes, Sequelize } from 'sequelize';
import { checkSessionBounds, createSequelize } from '../../core/database.js';
import { scratchDatabase } from '../chaos/scratch-database.js';
import { startInstance } from '../support/processes.js';
import { tokenFor } from '../support/tokens.js';

/**
 * What the service needs from its connections to stay safe behind a pooler in transaction mode or a
 * router that may point at a replica, checked on the test PostgreSQL (no cluster needed): the wait
 * bounds are proven at start wherever they come from, no session state is left on a connection, a
 * read-only database answers 503 with Retry-After, and start-up waits for a writable one.
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

describe('pooler safety: bounds proven at start, no session state, read-only answered 503', function () {
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
    // As a promotion would: the database takes writes (new sessions get the new default, so the
    // sessions already open are ended, as HAProxy ends them when the leader changes).
    const writable = new Promise((resolve) => setTimeout(resolve, 3000)).then(async () => {
      await sql(serverUrl(), `ALTER DATABASE ${name} SET default_transaction_read_only = off`);
      await sql(
        serverUrl(),
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`,
      );
    });
    try {
      const instance = await startInstance({ DATABASE_URL: db.url, LOG_LEVEL: 'warn' });
      try {
        await writable;
        expect(instance.output()).to.include('waiting for a writable database');
        const ready = await fetch(`${instance.url}/readyz`);
        expect(ready.status).to.equal(200);
      } finally {
        instance.kill();
        await instance.exited;
      }
    } finally {
      await writable;
      await db.drop();
    }
  });
});
