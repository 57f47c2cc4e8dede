// The Mode A transaction's edges ride with the engine's own statements (idempotency/folded-transaction.ts):
// BEGIN with the claim, COMMIT with the record's final state. Counted on the in-process server's
// `pg` client (every Sequelize and raw query is one call of it: one round trip).
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { setFailpoints } from '../../core/failpoints.js';
import { createContextValue } from '../../routers/context.js';
import { appRouter } from '../../routers/index.js';
import { createCallerFactory } from '../../routers/trpc.js';
import { createEngine } from '../../server/engine-from-config.js';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { pay } from '../support/payment-calls.js';
import { callsDuring, isIdBlock, queriesDuring } from '../support/queries.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { recordsOf } from './support.js';

describe('Mode A transaction folded into the engine statements (BEGIN with the claim, COMMIT with the final state)', () => {
  const order = (tenant: string, key: string, merchantOrderNo: string) =>
    http('POST', '/api/v1/orders', {
      headers: { ...bearer(tenant, '830000001'), 'Idempotency-Key': key },
      body: { merchantOrderNo, amount: '5.00' },
    });

  it('when a known user creates with a new key, then 1 round trip: idem_execute with the user check, the claim in the final state and the insert with an id from the block taken ahead; the answer is the row as stored; no connection is left in a transaction', async () => {
    await sharedServer();
    const tenant = uniqueTenant('fold');
    // The user's slot rows are made once per process (their own round trip): not counted below.
    expect((await order(tenant, idempotencyKey(), 'mo-warm')).status).to.equal(201);
    let res = { status: 0, text: '' };
    const calls = await callsDuring(async () => {
      const r = await order(tenant, idempotencyKey(), 'mo-fold');
      res = { status: r.status, text: r.text };
    });
    expect(res.status, res.text).to.equal(201);
    // A block of ids is taken once per 64 creates of the process: that round trip, when it falls here,
    // is not the request's own.
    const own = calls.filter((c) => !isIdBlock(c.text));
    expect(
      own.map((c) => c.text),
      own.map((c) => c.text).join('\n'),
    ).to.have.length(1);
    expect(own[0].text).to.match(/^SELECT \* FROM idem_execute\(\$1, \$2, .*\$18\)$/);
    const created = JSON.parse(res.text).data as { id: string; createdAt: string; updatedAt: string };
    const values = own[0].values ?? [];
    // The user check (user, tenant, token role, any role may create an order), the final state
    // (SUCCEEDED, 201, the sealed answer, the order's id) and the insert with the same id and time,
    // writing only under the claim's mark.
    expect(values.slice(0, 4)).to.deep.equal(['830000001', tenant, 'user', false]);
    expect(values.slice(13, 15)).to.deep.equal(['SUCCEEDED', 201]);
    expect(values[16]).to.equal(created.id);
    expect(values[17]).to.include(
      'INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, description, id, created_at, updated_at) SELECT',
    );
    expect(values[17]).to.include(
      `'${created.id}'::bigint, '${created.createdAt}'::timestamptz, '${created.createdAt}'::timestamptz`,
    );
    expect(values[17]).to.match(/WHERE current_setting\('idem\.claimed', true\) = '[^']+'/);
    expect(calls.some((c) => /^(START TRANSACTION|BEGIN|COMMIT)/.test(c.text))).to.equal(false);

    // The answer, known before the write, is the order as stored: a read of it shows the same.
    const read = await http('GET', `/api/v1/orders/${created.id}`, { headers: bearer(tenant, '830000001') });
    expect(read.status, read.text).to.equal(200);
    expect(JSON.parse(read.text).data).to.deep.equal(JSON.parse(res.text).data);
    expect(created.updatedAt).to.equal(created.createdAt);

    const records = await recordsOf(tenant);
    expect(records.map((r) => r.status)).to.deep.equal(['SUCCEEDED', 'SUCCEEDED']);
    expect(records.map((r) => r.resource_id)).to.include(created.id);
    const { services } = await sharedServer();
    const [open] = await services.sequelize.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE application_name = current_setting('application_name') AND state LIKE 'idle in transaction%'`,
      { type: QueryTypes.SELECT },
    );
    expect(open.n, 'pooled connections left inside a transaction').to.equal(0);
  });

  it('when a user is created with a new key, then its answer is the row as stored (every field, the time to the millisecond); a replay on the instance that created it is the auth read alone, one elsewhere the one statement, and both answer the same bytes and write nothing', async () => {
    const server = await sharedServer();
    const tenant = uniqueTenant('foldu');
    const admin = bearer(tenant, '830000003', 'admin');
    const key = idempotencyKey();
    const body = {
      name: 'Ada  Lovelace ',
      age: 36,
      username: 'ada.l-1',
      email: 'Ada@Example.org',
      role: 'admin' as const,
    };
    const first = await http('POST', '/api/v1/users', {
      headers: { ...admin, 'Idempotency-Key': key },
      body,
    });
    expect(first.status, first.text).to.equal(201);
    const data = JSON.parse(first.text).data as { id: string };
    expect(first.headers.get('location')).to.equal(`/api/v1/users/${data.id}`);
    const read = await http('GET', `/api/v1/users/${data.id}`, { headers: admin });
    expect(read.status, read.text).to.equal(200);
    expect(JSON.parse(read.text).data).to.deep.equal(data);

    const { services } = server;
    const usersOfTenant = async () => {
      const [row] = await services.sequelize.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM users WHERE tenant_id = :tenant',
        { replacements: { tenant }, type: QueryTypes.SELECT },
      );
      return row.n;
    };
    expect(await usersOfTenant()).to.equal(1);
    // This instance created it, so a retry most likely replays: the auth read answers it (taking no
    // new id: a replay needs none).
    let again = { status: 0, text: '', replayed: null as string | null };
    const here = await callsDuring(async () => {
      const r = await http('POST', '/api/v1/users', { headers: { ...admin, 'Idempotency-Key': key }, body });
      again = { status: r.status, text: r.text, replayed: r.headers.get('idempotent-replayed') };
    });
    expect(again.status).to.equal(201);
    expect(again.replayed).to.equal('true');
    expect(again.text).to.equal(first.text);
    const ownHere = here.filter((c) => !isIdBlock(c.text)).map((c) => c.text);
    expect(ownHere, ownHere.join('\n')).to.deep.equal(['SELECT * FROM idem_auth_read($1, $2, $3)']);

    // An engine that never saw the key (another instance's): the one statement finds the record.
    const elsewhere = createEngine(services.sequelize, services.config);
    const ctx = createContextValue(
      { ...services, idempotency: elsewhere },
      { authorization: admin.Authorization, 'idempotency-key': key, 'content-type': 'application/json' },
      'test-request',
    );
    let replayed: unknown;
    const there = await callsDuring(async () => {
      replayed = await createCallerFactory(appRouter)(ctx).users.create(body);
    });
    // (That engine also makes sure of the user's slot rows: once per user and process.)
    const ownThere = there
      .filter((c) => !isIdBlock(c.text) && !/INSERT INTO idempotency_slots/.test(c.text))
      .map((c) => c.text);
    expect(ownThere, ownThere.join('\n')).to.have.length(1);
    expect(ownThere[0]).to.match(/^SELECT \* FROM idem_execute\(/);
    expect(replayed).to.deep.equal(JSON.parse(first.text));
    expect(await usersOfTenant(), 'a replay wrote a row').to.equal(1);
  });

  it('when a failpoint between the claim and the commit is active, then a keyed create takes the path that has that moment (3 round trips: the final state with COMMIT in its own)', async () => {
    await sharedServer();
    const tenant = uniqueTenant('foldfp');
    expect((await order(tenant, idempotencyKey(), 'mo-warm')).status).to.equal(201);
    setFailpoints('local.after-write=stall(1)');
    let status = 0;
    let texts: string[] = [];
    try {
      texts = await queriesDuring(async () => {
        status = (await order(tenant, idempotencyKey(), 'mo-fp')).status;
      });
    } finally {
      setFailpoints('');
    }
    expect(status).to.equal(201);
    expect(texts, texts.join('\n')).to.have.length(3);
    expect(texts[1]).to.match(/RETURNING [^;]*;$/);
    expect(texts[2]).to.match(/^SELECT idem_finish_local\('[^']+', 'SUCCEEDED', 201, .*\); COMMIT;$/);
  });

  it('when the business write fails for good under a new key (another key holds the merchantOrderNo), then the final state is FAILED_FINAL written after ROLLBACK TO SAVEPOINT in the COMMIT round trip, the order is not doubled, and the key replays the 409', async () => {
    const tenant = uniqueTenant('foldf');
    expect((await order(tenant, idempotencyKey(), 'mo-taken')).status).to.equal(201);
    const key = idempotencyKey();
    let first = { status: 0, text: '' };
    const texts = await queriesDuring(async () => {
      const r = await order(tenant, key, 'mo-taken');
      first = { status: r.status, text: r.text };
    });
    expect(first.status, first.text).to.equal(409);
    const last = texts[texts.length - 1];
    expect(last).to.match(
      /^ROLLBACK TO SAVEPOINT idem_business; SELECT idem_finish_local\('[^']+', 'FAILED_FINAL', 409, .*\); COMMIT;$/,
    );
    const again = await order(tenant, key, 'mo-taken');
    expect(again.status).to.equal(409);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const records = await recordsOf(tenant);
    expect(records.map((r) => r.status).sort()).to.deep.equal(['FAILED_FINAL', 'SUCCEEDED']);
  });

  it('when a payment is created, then its Tx 1 opens with the lease claim (BEGIN in the same round trip) and commits with the payment row and the record linked to it; the order lookup and the user row ride with the claim; Tx 2 is one statement (record, payment, order) without a transaction: 3 round trips; one payment, SUCCEEDED', async () => {
    const { url } = await sharedServer();
    const tenant = uniqueTenant('foldp');
    const auth = bearer(tenant, '830000002');
    await createOrder(url, auth, 'mo-pay', '6.00');
    let res = { status: 0, text: '' };
    const texts = await queriesDuring(async () => {
      const r = await pay(url, auth, idempotencyKey(), { merchantOrderNo: 'mo-pay', amount: '6.00' });
      res = { status: r.status, text: r.text };
    });
    expect(res.status, res.text).to.equal(201);
    const claim = texts.findIndex((t) => /^BEGIN; SELECT \* FROM idem_claim\(/.test(t));
    const link = texts.findIndex((t) =>
      /^INSERT INTO payments .*; UPDATE idempotency_records SET resource_id = '[^']+' WHERE .*; COMMIT;$/.test(
        t,
      ),
    );
    // Nothing is read before the claim: the user row rides with it (routers/user-gate.ts).
    expect(claim, texts.join('\n')).to.equal(0);
    // The order and any payment of its merchantOrderNo are read in the claim's round trip, after it,
    // and the caller's user row last.
    expect(texts[claim]).to.match(
      /idem_claim\(.*\);\s*SELECT \* FROM idem_payment_lookup_refunded\('[^']+', 'mo-pay'\);\s*SELECT "userStatus" AS status, "userRole" AS role FROM idem_auth_read\('830000002', '[^']+', NULL\);$/s,
    );
    expect(link, texts.join('\n')).to.be.greaterThan(claim);
    // Between them only Tx 1's own reads and writes: no START TRANSACTION or COMMIT of its own.
    expect(texts.slice(claim, link).some((t) => /^(START TRANSACTION|COMMIT);?$/.test(t))).to.equal(false);
    // Tx 2 (after the charge) is one statement: no transaction of Sequelize's at all, and the
    // record, the payment and the order are written in that one round trip.
    expect(
      texts.filter((t) => /^(START TRANSACTION|COMMIT);?$/.test(t)),
      texts.join('\n'),
    ).to.have.length(0);
    // (idem_finish_payment, migration 20261124000002: the record, its slot, the payment, the order.)
    const tx2 = texts.filter((t) => /^SELECT idem_finish_payment\(\$1, /.test(t));
    expect(tx2, texts.join('\n')).to.have.length(1);
    // Three round trips in all: BEGIN + lease claim + the order and any payment of its
    // merchantOrderNo + the user row; the payment row + the record's link + COMMIT; Tx 2.
    expect(texts, texts.join('\n')).to.have.length(3);
    const records = await recordsOf(tenant);
    const payment = records.find((r) => r.scope_key.includes(':payments.create:'));
    expect(payment?.status).to.equal('SUCCEEDED');
    expect(payment?.resource_id).to.be.a('string');
  });
});
