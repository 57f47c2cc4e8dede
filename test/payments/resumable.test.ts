// Regression tests of issue 10 (defects 1, 4 and 9): each failed on main before the change that
// added resumable payments (a new key got 202 for ever; the original key too once its record was
// purged: now a real purge leaves a tombstone, that key gets 40905 and a new key resumes; an admin's
// payment of a user's order answered that user 403; a gateway 4xx was a 500).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { http as request } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import {
  type PaymentRequest,
  pay,
  payNotCharged,
  payUntilFinal,
  shortLeaseEnv,
} from '../support/payment-calls.js';
import { assertPaymentInvariants } from '../support/payment-invariants.js';
import { type Instance, startInstance } from '../support/processes.js';
import { reconcileCli } from '../support/reconcile-cli.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('payments: resumable after "not charged" (CONTRACT section 3), owned by the order owner', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;
  let base: string;

  before(async () => {
    db = await createIsolatedDatabase('resumable');
    slot = await startGatewaySlot();
    await slot.simulator();
    instance = await startInstance(shortLeaseEnv(db.url, slot.url));
    base = instance.url;
  });
  beforeEach(async () => {
    if (slot.mode !== 'simulator') await slot.simulator();
    await slot.client.setFaults({});
  });
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  async function setup() {
    const tenant = uniqueTenant('res');
    const auth = bearer(tenant, '820000001');
    await createOrder(base, auth, 'mo-1', '25.00');
    return { tenant, auth, body: { merchantOrderNo: 'mo-1', amount: '25.00' } };
  }

  /** Until `n` more rounds of the recoverer have ended. */
  async function recovererRounds(n: number) {
    const runs = async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      return Number(/^payment_recoverer_runs_total\{result="ok"\} (\S+)$/m.exec(text)?.[1] ?? 0);
    };
    const start = await runs();
    while ((await runs()) < start + n) await sleep(100);
  }

  /** A payment answered 503 because the gateway failed with 5xx: nothing charged, resumable. */
  const notCharged = (auth: Record<string, string>, body: PaymentRequest) =>
    payNotCharged(base, slot.client, auth, body);

  async function paymentOf(tenant: string) {
    const [row] = await db.sequelize.query<{
      id: string;
      paymentNo: string;
      status: string;
      resumable: boolean;
    }>(
      `SELECT id, payment_no AS "paymentNo", status, resumable_since IS NOT NULL AS resumable
       FROM payments WHERE merchant_id = $1`,
      { bind: [tenant], type: QueryTypes.SELECT },
    );
    return row;
  }

  const chargesOf = async (paymentNo: string) =>
    (await slot.ledger()).charges.filter((c) => c.paymentNo === paymentNo);

  it('when a payment got 503 and the client comes back with a NEW key, then that key executes it: 201 SUCCEEDED, same paymentNo, one charge', async () => {
    const { tenant, auth, body } = await setup();
    await notCharged(auth, body);
    const before = await paymentOf(tenant);
    expect(before).to.include({ status: 'PROCESSING', resumable: true });

    const res = await pay(base, auth, idempotencyKey(), body);
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get('idempotent-replayed')).to.equal(null);
    expect(res.body.data).to.include({ id: before.id, paymentNo: before.paymentNo, status: 'SUCCEEDED' });
    expect(await chargesOf(before.paymentNo)).to.have.length(1);
    expect(await paymentOf(tenant)).to.include({ status: 'SUCCEEDED', resumable: false });
    await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, { exclusiveLedger: false });
  });

  it('when a payment is resumable, then /metrics counts it (payments_resumable) with the age of the oldest', async () => {
    const { auth, body } = await setup();
    await notCharged(auth, body);
    const text = await (await fetch(`${base}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    expect(value('payments_resumable')).to.be.at.least(1);
    expect(value('payments_resumable_oldest_age_seconds')).to.be.at.least(0);
    expect(value('idempotency_oldest_processing_age_seconds')).to.be.at.least(0);
  });

  it("when the original key's record was purged, then that key gets 40905 and charges nothing; a new key resumes the payment, and a later new key gets that payment", async () => {
    const { tenant, auth, body } = await setup();
    const key = await notCharged(auth, body);
    const before = await paymentOf(tenant);
    // Its TTL over, then the real purge: the record goes, its tombstone stays.
    await db.sequelize.query(
      "UPDATE idempotency_records SET expires_at = now() - interval '1 minute' WHERE resource_id = $1",
      { bind: [before.id] },
    );
    await purgeExpired(db.sequelize);
    // Gone, whichever purge took it: this one or the instance's own (every PURGE_INTERVAL_MS).
    const [left] = await db.sequelize.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM idempotency_records WHERE resource_id = $1',
      { bind: [before.id], type: QueryTypes.SELECT },
    );
    expect(left.n).to.equal(0);
    // Made longer ago than a key lives: unlike a refund's (only its key resumes it), a payment is not
    // closed by the recoverer, since a new key for its order resumes it (CONTRACT section 3).
    await db.sequelize.query("UPDATE payments SET created_at = now() - interval '169 hours' WHERE id = $1", {
      bind: [before.id],
    });
    await recovererRounds(3);
    for (const b of [body, { ...body, amount: '26.00' }]) {
      const refused = await pay(base, auth, key, b);
      expect(refused.status, refused.text).to.equal(409);
      expect(refused.body.code).to.equal(40905);
    }
    expect(await chargesOf(before.paymentNo)).to.have.length(0);
    expect(await paymentOf(tenant)).to.deep.include({ id: before.id, status: before.status });

    const res = await pay(base, auth, idempotencyKey(), body);
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data).to.include({ id: before.id, status: 'SUCCEEDED' });
    const later = await pay(base, auth, idempotencyKey(), body);
    expect(later.status, later.text).to.equal(201);
    expect(later.body.data).to.include({ id: before.id, status: 'SUCCEEDED' });
    expect(await chargesOf(before.paymentNo)).to.have.length(1);
  });

  it('when the old key and many new keys resume at once, then exactly one charge, and every key ends with the same payment', async () => {
    const { tenant, auth, body } = await setup();
    const oldKey = await notCharged(auth, body);
    const before = await paymentOf(tenant);
    await slot.client.setFaults({ latencyMs: 150 }); // keeps the winner busy while the others arrive
    const keys = [oldKey, ...Array.from({ length: 8 }, () => idempotencyKey())];
    const first = await Promise.all(keys.map((k) => pay(base, auth, k, body)));
    for (const res of first) expect([201, 202], res.text).to.include(res.status);
    await slot.client.setFaults({});
    const finals = await Promise.all(keys.map((k) => payUntilFinal(base, auth, k, body)));
    for (const { final } of finals) {
      expect(final.status, final.text).to.equal(201);
      expect(final.body.data).to.include({ id: before.id, status: 'SUCCEEDED' });
    }
    expect(await chargesOf(before.paymentNo)).to.have.length(1);
  });

  it('when the gateway is still failing on the resume, then 503 again and the payment stays resumable', async () => {
    const { tenant, auth, body } = await setup();
    await notCharged(auth, body);
    await slot.client.setFaults({ errorRate: 1 });
    const again = await pay(base, auth, idempotencyKey(), body);
    expect(again.status, again.text).to.equal(503);
    expect(Number(again.headers.get('retry-after'))).to.be.greaterThan(0);
    const row = await paymentOf(tenant);
    expect(row).to.include({ status: 'PROCESSING', resumable: true });
    expect(await chargesOf(row.paymentNo)).to.have.length(0);
  });

  it('when a payment is resumable, then the recoverer never charges it, and reconcile lists it (exit 1 only beyond --resumable-max-age)', async () => {
    const { tenant, auth, body } = await setup();
    await notCharged(auth, body);
    const row = await paymentOf(tenant);
    // Several recoverer rounds (RECOVERER_INTERVAL_MS=200, lease 1.5 s) pass without a charge.
    await sleep(2500);
    expect(await paymentOf(tenant)).to.include({ status: 'PROCESSING', resumable: true });
    expect(await chargesOf(row.paymentNo)).to.have.length(0);

    const young = await reconcileCli(db.url, slot.url, ['--json', '--merchant', tenant]);
    expect(young.code, young.stderr).to.equal(0);
    const listed = JSON.parse(young.stdout).entries.filter((e: { kind: string }) => e.kind === 'resumable');
    expect(listed.map((e: { paymentNo: string; outcome: string }) => [e.paymentNo, e.outcome])).to.deep.equal(
      [[row.paymentNo, 'waiting']],
    );
    await sleep(1100);
    const old = await reconcileCli(db.url, slot.url, [
      '--json',
      '--merchant',
      tenant,
      '--resumable-max-age',
      '0',
    ]);
    expect(old.code, old.stdout).to.equal(1);
    // Listing never charges either.
    expect(await chargesOf(row.paymentNo)).to.have.length(0);
  });

  it("when an admin paid a user's order, then the payment is the user's: the user reads its Location and their own POST replays it", async () => {
    const tenant = uniqueTenant('own');
    const user = bearer(tenant, '820000002');
    const admin = bearer(tenant, '820000099', 'admin');
    await createOrder(base, user, 'mo-own', '12.00');
    const body = { merchantOrderNo: 'mo-own', amount: '12.00' };
    const paid = await pay(base, admin, idempotencyKey(), body);
    expect(paid.status, paid.text).to.equal(201);
    const location = paid.headers.get('location') ?? '';
    const read = await request('GET', location, { baseUrl: base, headers: user });
    expect(read.status, read.text).to.equal(200);
    expect(read.body.data.id).to.equal(paid.body.data.id);
    const own = await pay(base, user, idempotencyKey(), body);
    expect(own.status).to.equal(201);
    expect(own.headers.get('idempotent-replayed')).to.equal('true');
    const again = await request('GET', own.headers.get('location') ?? '', { baseUrl: base, headers: user });
    expect(again.status).to.equal(200);
  });

  it('when an executor got a 5xx but stalled past its lease while another took over and charged, then the stale executor answers from the record (the final payment), not 503', async () => {
    const stale = await startInstance(
      shortLeaseEnv(db.url, slot.url, {
        FAILPOINTS: 'payment.charge.after=stall(2500)@1',
        RECOVERER_INTERVAL_MS: '60000',
      }),
    );
    try {
      const tenant = uniqueTenant('fence');
      const auth = bearer(tenant, '820000004');
      await createOrder(base, auth, 'mo-f', '6.00');
      const body = { merchantOrderNo: 'mo-f', amount: '6.00' };
      const key = idempotencyKey();
      await slot.client.setFaults({ errorRate: 1 });
      const first = pay(stale.url, auth, key, body); // 5xx, then stalls before recording "not charged"
      await sleep(400);
      await slot.client.setFaults({});
      // Its lease (1.5 s) ends while it stalls; a retry elsewhere takes over and charges.
      const taken = await payUntilFinal(base, auth, key, body, { pauseMs: 200 });
      expect(taken.final.status, taken.final.text).to.equal(201);
      const late = await first;
      expect(late.status, late.text).to.equal(201);
      expect(late.body.data).to.deep.equal(taken.final.body.data);
      expect(await chargesOf(taken.final.body.data.paymentNo)).to.have.length(1);
    } finally {
      await stale.stop();
    }
  });

  it('when the gateway rejects a charge with a 4xx, then 503 (not 500), nothing charged, and the payment is resumable', async () => {
    const rejecting = http.createServer((req, res) => {
      req.resume();
      res.writeHead(req.method === 'GET' ? 404 : 422, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'rejected' }));
    });
    await new Promise<void>((resolve) => rejecting.listen(0, '127.0.0.1', resolve));
    const gatewayUrl = `http://127.0.0.1:${(rejecting.address() as AddressInfo).port}`;
    const other = await startInstance(shortLeaseEnv(db.url, gatewayUrl, { RECOVERER_INTERVAL_MS: '60000' }));
    try {
      const tenant = uniqueTenant('rej');
      const auth = bearer(tenant, '820000003');
      await createOrder(other.url, auth, 'mo-rej', '5.00');
      const res = await pay(other.url, auth, idempotencyKey(), { merchantOrderNo: 'mo-rej', amount: '5.00' });
      expect(res.status, res.text).to.equal(503);
      expect(res.body.code).to.equal(503);
      expect(await paymentOf(tenant)).to.include({ status: 'PROCESSING', resumable: true });
    } finally {
      await other.stop();
      rejecting.closeAllConnections();
      await new Promise((resolve) => rejecting.close(resolve));
    }
  });
});
