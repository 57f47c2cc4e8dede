// Issue 26, defect 1: the keyed create in one statement (idempotency/at-once.ts, idem_execute) told a
// failed business INSERT from the claim's own errors by PostgreSQL's English error context. With the
// server's messages in German, a taken username or merchantOrderNo answered 500 on every retry and a
// business write's lock time-out 202. The messages are made German by test/support/german-messages.ts
// (the embedded PostgreSQL has no translations; the check below proves the text the service reads
// is not English).
import { expect } from 'chai';
import pg from 'pg';
import { scopeKey } from '../../idempotency/key.js';
import { germanMessages, isGerman } from '../support/german-messages.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf, createUser, uniqueUsername } from '../support/users.js';
import { createOrderVia, expectFailure, TRANSPORTS, type Transport } from './support.js';

/** A second connection that holds a lock for the length of `during`. */
async function holding<T>(lock: string, values: unknown[], during: () => Promise<T>): Promise<T> {
  const client = new pg.Client(process.env.TEST_DATABASE_URL);
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query(lock, values);
    return await during();
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    await client.end();
  }
}

describe('keyed creates under a non-English lc_messages (decided by SQLSTATE and markers, never message text)', () => {
  let undo: () => void = () => {};
  before(async () => {
    await sharedServer();
    undo = germanMessages();
  });
  after(() => undo());

  it('when the server writes German messages, then the errors the service reads carry German text (the precondition)', async () => {
    const { sequelize } = (await sharedServer()).services;
    // A function with several arguments, as idem_execute's context names it ("f(text, integer)").
    const err = await sequelize
      .query(`CREATE FUNCTION pg_temp.de_check(a text, b integer) RETURNS void LANGUAGE plpgsql
              AS $$ BEGIN EXECUTE 'SELECT 1/0'; END $$; SELECT pg_temp.de_check('x', 1)`)
      .then(
        () => undefined,
        (e: { parent?: { where?: string } }) => e,
      );
    const where = (err as { parent?: { where?: string } } | undefined)?.parent?.where ?? '';
    expect(where).to.satisfy(isGerman, where);
  });

  for (const transport of TRANSPORTS) {
    it(`when a keyed order create (${transport}) takes a merchantOrderNo already taken, then 409 40904 on the first try and on the retry`, async () => {
      const tenant = uniqueTenant('de');
      const headers = bearer(tenant, '41', 'user');
      const body = { merchantOrderNo: `M-${idempotencyKey()}`, amount: '1.00' };
      const first = await createOrderVia({
        transport,
        headers: { ...headers, 'Idempotency-Key': idempotencyKey() },
        body,
      });
      expect(first.status, JSON.stringify(first.body)).to.equal(transport === 'rest' ? 201 : 200);
      const keyed = { ...headers, 'Idempotency-Key': idempotencyKey() };
      for (let attempt = 0; attempt < 2; attempt++) {
        expectFailure(await createOrderVia({ transport, headers: keyed, body }), 409, 40904);
      }
    });
  }

  for (const transport of ['rest', 'trpc'] as Transport[]) {
    it(`when a keyed user create (${transport}) takes a username already taken, then 409 40904 on the first try and on the retry`, async () => {
      const tenant = uniqueTenant('de');
      const username = uniqueUsername();
      await createUser(tenant, { username });
      const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
      for (let attempt = 0; attempt < 2; attempt++) {
        const res =
          transport === 'rest'
            ? await http('POST', '/api/v1/users', { headers, body: { name: 'Taken', age: 3, username } })
            : await http('POST', '/trpc/users.create', {
                headers,
                body: { name: 'Taken', age: 3, username },
              });
        expect(res.status, JSON.stringify(res.body)).to.equal(409);
        const code = transport === 'rest' ? res.body.code : res.body.error.data.businessCode;
        expect(code).to.equal(40904);
      }
    });
  }

  it("when the business INSERT waits out the lock bound on another transaction's row, then 503 (nothing in flight), not 202", async () => {
    const tenant = uniqueTenant('de');
    const merchantOrderNo = `M-${idempotencyKey()}`;
    const res = await holding(
      `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, created_at, updated_at)
       VALUES ($1, 7, $2, 1, 'EUR', now(), now())`,
      [tenant, merchantOrderNo],
      () =>
        createOrderVia({
          transport: 'rest',
          headers: { ...bearer(tenant, '41', 'user'), 'Idempotency-Key': idempotencyKey() },
          body: { merchantOrderNo, amount: '1.00' },
        }),
    );
    expectFailure(res, 503);
  });

  it("when the claim waits out the lock bound on a duplicate's key, then 202 (the duplicate is in flight)", async () => {
    const tenant = uniqueTenant('de');
    const key = idempotencyKey();
    const scope = scopeKey(tenant, '41', 'orders.create', key);
    const res = await holding('SELECT pg_advisory_xact_lock(7648, hashtext($1))', [scope], () =>
      createOrderVia({
        transport: 'rest',
        headers: { ...bearer(tenant, '41', 'user'), 'Idempotency-Key': key },
        body: { merchantOrderNo: `M-${key}`, amount: '1.00' },
      }),
    );
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
  });
});
