// Issue 27 item 6: a second effect on the mechanism (a message to a fake partner over loopback HTTP),
// driven through the fault checks payments pass: crash between perform and finalise, unknown, not done.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { sqlLiteral, sqlRows } from '../../core/sql.js';
import { defineEffect, type EffectDeps } from '../../idempotency/effect.js';
import { sweepExpired } from '../../idempotency/effect-recover.js';
import { runEffect } from '../../idempotency/effect-run.js';
import { sharedServer } from '../support/server.js';
import { idempotencyKey } from '../support/tokens.js';

type Row = { id: string; status: string; resumableSince: Date | null };
const sent = new Map<string, number>(); // the partner ignores keys: a second send would count 2
let mode: 'ok' | 'fail' | 'lose' = 'ok';
let crash = false;
let url = '';
const call = (method: string, id: string) =>
  fetch(`${url}/${id}`, { method }).then(
    (r) => r.status,
    () => 0,
  );
const row = async (id: string) =>
  (
    await sqlRows<Row>(
      deps.sequelize,
      'SELECT id, status, resumable_since AS "resumableSince" FROM partner_messages WHERE id = $1',
      [id],
    )
  )[0];
const effect = defineEffect<EffectDeps, string, Row, true>({
  name: 'test.partner-message',
  table: 'partner_messages',
  downstream: 'Partner',
  failpoints: {},
  lookup: (id) =>
    `SELECT id, status, resumable_since AS "resumableSince" FROM partner_messages WHERE id = ${sqlLiteral(id)};`,
  prepare: (_t, found, id) =>
    found[0]
      ? { kind: 'existing', row: found[0] as Row }
      : {
          kind: 'new',
          row: { id, status: 'PROCESSING', resumableSince: null },
          insert: `INSERT INTO partner_messages (id) VALUES (${sqlLiteral(id)});`,
        },
  read: (id) => row(id),
  perform: async (_d, r) => {
    const status = await call('POST', r.id);
    return status === 201
      ? { kind: 'done', result: true }
      : status === 503
        ? { kind: 'not_done' }
        : { kind: 'unknown' };
  },
  query: async (_d, r) =>
    (await call('GET', r.id)) === 200 ? { kind: 'done', result: true } : { kind: 'not_done' },
  finalise: async (d, lease, r) => {
    if (crash) {
      crash = false;
      throw new Error('the process died between perform and finalise');
    }
    const reply = { status: 201, headers: {}, body: { id: r.id } };
    const parts = d.engine.leases.finishParts(lease, 'SUCCEEDED', reply);
    const written = await sqlRows<{ n: number }>(
      d.sequelize,
      `WITH ${parts.ctes}, w AS (UPDATE partner_messages SET status = 'SENT', resumable_since = NULL
      WHERE id = $6 AND EXISTS (SELECT 1 FROM done) RETURNING 1) ${parts.select}`,
      [...parts.bind, r.id],
    );
    return Number(written[0]?.n) === 1 ? reply : undefined;
  },
  answer: (r) => ({ status: 201, headers: {}, body: { id: r.id } }),
});
let deps: EffectDeps;
let partner: Server;
const send = (id: string, key = idempotencyKey()) =>
  runEffect(
    effect,
    deps,
    {
      scopeKey: `t:p:test.partner-message:${key}`,
      requestHash: id,
      userScope: 't:p',
      operation: effect.name,
      ttlHours: 1,
    },
    id,
    () => ({ status: 400, headers: {}, body: null }),
  );

describe('effects: a test-only effect (a message to a partner) passes the fault checks of payments', () => {
  before(async () => {
    const { services } = await sharedServer();
    deps = { sequelize: services.sequelize, engine: services.idempotency };
    await deps.sequelize.query(`CREATE TABLE IF NOT EXISTS partner_messages (id text PRIMARY KEY, status text NOT NULL DEFAULT 'PROCESSING',
      resumable_since timestamptz, updated_at timestamptz NOT NULL DEFAULT now())`);
    partner = createServer((req, res) => {
      const id = (req.url ?? '').slice(1);
      if (req.method === 'GET') return res.writeHead(sent.has(id) ? 200 : 404).end();
      const now = mode;
      mode = 'ok';
      if (now === 'fail') return res.writeHead(503).end();
      sent.set(id, (sent.get(id) ?? 0) + 1);
      // Sent and done, but the answer is lost (a reset after the partner acted).
      if (now === 'lose') return req.socket.destroy();
      res.writeHead(201).end();
    });
    await new Promise<void>((resolve) => partner.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(partner.address() as AddressInfo).port}`;
  });
  after(() => new Promise((resolve) => partner.close(resolve)));

  it('when the process dies between perform and finalise, then the recoverer queries and finalises: sent once', async () => {
    const id = `m${idempotencyKey()}`;
    crash = true;
    await send(id).then(
      () => expect.fail('finalise should have thrown'),
      () => {},
    );
    await deps.sequelize.query(
      `UPDATE idempotency_records SET lease_until = now() - interval '1 second' WHERE resource_id = $1`,
      { bind: [id] },
    );
    expect(await sweepExpired(effect, deps, 1000)).to.be.at.least(1);
    expect((await row(id))?.status).to.equal('SENT');
    expect(sent.get(id)).to.equal(1);
  });

  it('when the answer is lost (unknown), then the partner is asked before sending again: executed, sent once', async () => {
    const id = `m${idempotencyKey()}`;
    mode = 'lose';
    expect((await send(id)).kind).to.equal('executed');
    expect(sent.get(id)).to.equal(1);
  });

  it('when the partner certainly did nothing (503), then the message is resumable and a new key sends it once', async () => {
    const id = `m${idempotencyKey()}`;
    mode = 'fail';
    expect((await send(id)).kind).to.equal('failed_retryable');
    expect((await row(id))?.resumableSince).to.be.instanceOf(Date);
    expect((await send(id)).kind).to.equal('executed');
    expect([(await row(id))?.status, sent.get(id)]).to.deep.equal(['SENT', 1]);
  });
});
