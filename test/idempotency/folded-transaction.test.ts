// The Mode A transaction's edges ride with the engine's own statements (idempotency/folded-transaction.ts):
// BEGIN with the claim, COMMIT with the record's final state. Counted on the in-process server's
// `pg` client (every Sequelize and raw query is one call of it: one round trip).
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { setFailpoints } from '../../core/failpoints.js';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { pay } from '../support/payment-calls.js';
import { queriesDuring } from '../support/queries.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { recordsOf } from './support.js';

describe('Mode A transaction folded into the engine statements (BEGIN with the claim, COMMIT with the final state)', () => {
  const order = (tenant: string, key: string, merchantOrderNo: string) =>
    http('POST', '/api/v1/orders', {
      headers: { ...bearer(tenant, '830000001'), 'Idempotency-Key': key },
      body: { merchantOrderNo, amount: '5.00' },
    });

  it('when a known user creates with a new key, then 2 round trips: auth with the record read and the new id allocated, then BEGIN + claim + the insert with that id + the final state + COMMIT; the answer is the row as stored; no connection is left in a transaction', async () => {
    await sharedServer();
    const tenant = uniqueTenant('fold');
    // The user's slot rows are made once per process (their own round trip): not counted below.
    expect((await order(tenant, idempotencyKey(), 'mo-warm')).status).to.equal(201);
    let res = { status: 0, text: '' };
    const texts = await queriesDuring(async () => {
      const r = await order(tenant, idempotencyKey(), 'mo-fold');
      res = { status: r.status, text: r.text };
    });
    expect(res.status, res.text).to.equal(201);
    expect(texts, texts.join('\n')).to.have.length(2);
    expect(texts[0]).to.match(/^SELECT \* FROM idem_auth_read_allocating\(\$1, \$2, \$3, \$4\)$/);
    expect(texts[1]).to.match(/^BEGIN; SET LOCAL lock_timeout/);
    // The insert rides with the claim, after its savepoint, with the allocated id and time, and writes
    // only if the claim was ours; so does the final state, and the round trip ends with COMMIT.
    const created = JSON.parse(res.text).data as { id: string; createdAt: string; updatedAt: string };
    expect(texts[1]).to.include(
      `SAVEPOINT idem_business; INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency, description, id, created_at, updated_at) SELECT`,
    );
    expect(texts[1]).to.include(
      `'${created.id}'::bigint, '${created.createdAt}'::timestamptz, '${created.createdAt}'::timestamptz WHERE current_setting('idem.claimed', true) = '`,
    );
    expect(texts[1]).to.match(
      /RETURNING [^;]*; SELECT idem_finish_local\('[^']+', 'SUCCEEDED', 201, '[^']+', '[0-9]+'\) WHERE current_setting\('idem\.claimed', true\) = '[^']+'; COMMIT;$/,
    );
    expect(texts.some((t) => /^(START TRANSACTION|COMMIT);?$/.test(t))).to.equal(false);

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

  it('when a user is created with a new key, then its answer is the row as stored (every field, the time to the millisecond), a replay answers the same bytes and allocates no id, and the id is the next of the sequence', async () => {
    await sharedServer();
    const tenant = uniqueTenant('foldu');
    const admin = bearer(tenant, '830000003', 'admin');
    const key = idempotencyKey();
    const body = {
      name: 'Ada  Lovelace ',
      age: 36,
      username: 'ada.l-1',
      email: 'Ada@Example.org',
      role: 'admin',
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

    const { services } = await sharedServer();
    const lastId = async () => {
      const [row] = await services.sequelize.query<{ v: string }>(
        `SELECT last_value::text AS v FROM users_id_seq`,
        { type: QueryTypes.SELECT },
      );
      return row.v;
    };
    const before = await lastId();
    const again = await http('POST', '/api/v1/users', {
      headers: { ...admin, 'Idempotency-Key': key },
      body,
    });
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.text).to.equal(first.text);
    expect(await lastId(), 'a replay allocated an id').to.equal(before);
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

  it('when a payment is created, then its Tx 1 opens with the lease claim (BEGIN in the same round trip) and commits with the payment row and the record linked to it; the order lookup rides with the claim; Tx 2 is one statement (record, payment, order) without a transaction: 4 round trips; one payment, SUCCEEDED', async () => {
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
    expect(claim, texts.join('\n')).to.be.greaterThan(0);
    // The order and any payment of its merchantOrderNo are read in the claim's round trip, after it.
    expect(texts[claim]).to.match(
      /idem_claim\(.*\);\s*SELECT \* FROM idem_payment_lookup\('[^']+', 'mo-pay'\);$/s,
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
    // Four round trips in all: auth with the record read; BEGIN + lease claim + the order and any
    // payment of its merchantOrderNo; the payment row + the record's link + COMMIT; Tx 2.
    expect(texts, texts.join('\n')).to.have.length(4);
    const records = await recordsOf(tenant);
    const payment = records.find((r) => r.scope_key.includes(':payments.create:'));
    expect(payment?.status).to.equal('SUCCEEDED');
    expect(payment?.resource_id).to.be.a('string');
  });
});
