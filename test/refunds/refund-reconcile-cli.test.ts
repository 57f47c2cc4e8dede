// Refunds through real processes and `npm run reconcile`: a gateway that ignores keys refunds one
// refundNo twice (a first request delayed in the network arrives after the retry that took the refund
// over was refunded), and an instance SIGKILLed after the gateway refunded leaves a refund made but
// not recorded until `--repair`.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import type { RefundEntry } from '../../payments/reconcile-refunds.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { shortLeaseEnv } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { reconcileCli } from '../support/reconcile-cli.js';
import { startRefundHole } from '../support/refund-hole.js';
import { assertRefundInvariants, paidPayment, refund } from '../support/refunds.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

// No recoverer anywhere: what finishes a refund here is a retry or reconcile, nothing in between.
const ENV = { IDEMPOTENCY_LEASE_MS: '1500', GATEWAY_TIMEOUT_MS: '500', RECOVERER_INTERVAL_MS: '3600000' };

describe('refunds: a gateway that ignores keys, a refund made but not recorded, then npm run reconcile', function () {
  this.timeout(120000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let hole: Awaited<ReturnType<typeof startRefundHole>>;
  let survivor: Instance;
  const started: Instance[] = [];

  before(async () => {
    db = await createIsolatedDatabase('refrec');
    slot = await startGatewaySlot();
    hole = await startRefundHole(slot.url);
    survivor = await startInstance(shortLeaseEnv(db.url, hole.url, ENV));
    started.push(survivor);
  });
  after(async () => {
    for (const i of started) i.kill();
    await Promise.all(started.map((i) => i.exited));
    await hole?.close();
    await slot?.close();
    await db?.drop();
  });

  const victim = async (failpoints: string) => {
    const i = await startInstance(shortLeaseEnv(db.url, slot.url, { ...ENV, FAILPOINTS: failpoints }));
    started.push(i);
    return i;
  };
  const reconcile = async (tenant: string, ...args: string[]) => {
    const run = await reconcileCli(db.url, slot.url, ['--json', '--merchant', tenant, ...args]);
    const report = JSON.parse(run.stdout) as { refundEntries: RefundEntry[] };
    return { code: run.code, kinds: report.refundEntries.map((e) => [e.kind, e.outcome]) };
  };
  const refundRow = async (paymentId: string) =>
    (
      await db.sequelize.query<{ id: string; refundNo: string; status: string; leaseOver: boolean }>(
        `SELECT f.id, f.refund_no AS "refundNo", f.status, bool_and(r.lease_until < now()) AS "leaseOver"
         FROM refunds f JOIN idempotency_records r ON r.resource_id = f.id WHERE f.payment_id = $1 GROUP BY f.id`,
        { bind: [paymentId], type: QueryTypes.SELECT },
      )
    )[0];
  const untilLeaseOver = async (paymentId: string) => {
    while (!(await refundRow(paymentId))?.leaseOver) await sleep(100);
  };

  it('when the first request is delayed in the network past its lease and a retry took over, then a gateway ignoring keys refunds twice and reconcile reports it (exit 1), never moving money', async () => {
    const tenant = uniqueTenant('rrk');
    const auth = bearer(tenant, '860000001');
    const payment = await paidPayment(survivor.url, auth, '50.00');
    await slot.client.setFaults({ ignoreIdempotencyKey: true });
    hole.holdNext();
    const key = idempotencyKey();
    const first = await refund(survivor.url, auth, payment.id, key, { amount: '20' });
    expect(first.status, 'sent, no answer, the query knows none').to.equal(202);
    await untilLeaseOver(payment.id);
    const retry = await refund(survivor.url, auth, payment.id, key, { amount: '20' });
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body.data.status).to.equal('SUCCEEDED');
    const refundNo = retry.body.data.refundNo;
    // The delayed request arrives; the gateway ignores its key and refunds again.
    hole.release();
    const made = async () => (await slot.ledger()).refunds.filter((r) => r.refundNo === refundNo);
    while ((await made()).length < 2) await sleep(50);
    expect((await made()).map((r) => r.status)).to.deep.equal(['SUCCEEDED', 'SUCCEEDED']);
    const run = await reconcile(tenant, '--repair');
    expect(run.kinds).to.deep.equal([['refunded-more-than-once', 'reported']]);
    expect(run.code).to.equal(1);
    expect(await made(), 'reconcile moved no money').to.have.length(2);
    const [row] = await assertRefundInvariants(db.sequelize, () => slot.ledger(), tenant);
    expect(row.amountRefunded, 'the service recorded one refund').to.equal('20.00');
  });

  it('when the instance is SIGKILLed after the gateway refunded, then reconcile reports it, --repair finalises it query first, and the client replays it', async () => {
    await slot.client.setFaults({});
    const killed = await victim('refund.perform.after=sigkill@1');
    const tenant = uniqueTenant('rrk');
    const auth = bearer(tenant, '860000002');
    const payment = await paidPayment(survivor.url, auth, '40.00');
    const key = idempotencyKey();
    expect((await refund(killed.url, auth, payment.id, key, { amount: '15' })).status).to.equal(0);
    await untilLeaseOver(payment.id);
    const looked = await reconcile(tenant);
    expect(looked.kinds).to.deep.equal([['refund-processing-but-refunded', 'reported']]);
    expect(looked.code).to.equal(1);
    const repaired = await reconcile(tenant, '--repair');
    expect(repaired.kinds).to.deep.equal([['refund-processing-but-refunded', 'repaired']]);
    expect(repaired.code).to.equal(0);
    const row = await refundRow(payment.id);
    expect(row.status).to.equal('SUCCEEDED');
    const replay = await refund(survivor.url, auth, payment.id, key, { amount: '15' });
    expect(replay.status, replay.text).to.equal(201);
    expect(replay.body.data).to.include({ id: row.id, status: 'SUCCEEDED', amount: '15.00' });
    expect((await reconcile(tenant, '--repair')).kinds).to.deep.equal([]);
    await assertRefundInvariants(db.sequelize, () => slot.ledger(), tenant, { settled: true });
  });
});
