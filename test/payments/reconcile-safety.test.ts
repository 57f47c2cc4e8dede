// Regression tests of issue 10, defect 5: before the fix, reconcile refunded "extra" charges while an
// executor held a live lease, and chose the charge to keep among charges already refunded, so two
// runs could leave a SUCCEEDED payment with no charge standing.
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { pay, shortLeaseEnv } from '../support/payment-calls.js';
import { type Instance, startInstance } from '../support/processes.js';
import { reconcileCli } from '../support/reconcile-cli.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

interface Entry {
  kind: string;
  outcome: string;
  chargeIds: string[];
}

describe('reconcile: never refunds under a live lease, never keeps a refunded charge, a second run is a no-op', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('reconsafe');
    slot = await startGatewaySlot();
    await slot.simulator();
    instance = await startInstance(shortLeaseEnv(db.url, slot.url, { RECOVERER_INTERVAL_MS: '60000' }));
  });
  after(async () => {
    await instance?.stop();
    await slot?.close();
    await db?.drop();
  });

  /** A SUCCEEDED payment, then a second charge of its paymentNo (a gateway that ignored the key). */
  async function chargedTwice(merchantOrderNo: string) {
    const tenant = uniqueTenant('rs');
    const auth = bearer(tenant, '830000001');
    await createOrder(instance.url, auth, merchantOrderNo, '9.00');
    const paid = await pay(instance.url, auth, idempotencyKey(), { merchantOrderNo, amount: '9.00' });
    expect(paid.status, paid.text).to.equal(201);
    const { id, paymentNo } = paid.body.data as { id: string; paymentNo: string };
    await slot.client.setFaults({ ignoreIdempotencyKey: true });
    const second = await slot.client.charge({ paymentNo, amount: '9.00', currency: 'USD' });
    await slot.client.setFaults({});
    expect(second.kind).to.equal('charged');
    const [kept] = await db.sequelize.query<{ chargeId: string }>(
      'SELECT charge_id AS "chargeId" FROM payments WHERE id = $1',
      { bind: [id], type: QueryTypes.SELECT },
    );
    const charges = (await slot.ledger()).charges.filter((c) => c.paymentNo === paymentNo);
    expect(charges).to.have.length(2);
    return { tenant, id, paymentNo, kept: kept.chargeId, charges };
  }

  const entriesOf = async (tenant: string, repair: boolean): Promise<Entry[]> => {
    const run = await reconcileCli(db.url, slot.url, [
      '--json',
      '--merchant',
      tenant,
      ...(repair ? ['--repair'] : []),
    ]);
    expect(run.stderr).to.equal('');
    return JSON.parse(run.stdout).entries;
  };
  const refundedIds = async (paymentNo: string) =>
    (await slot.ledger()).refunds.filter((r) => r.paymentNo === paymentNo).map((r) => r.chargeId);

  it('when an executor holds a live lease on the payment, then --repair refunds nothing; once the lease is gone it refunds the extra only, and a second run does nothing', async () => {
    const p = await chargedTwice('mo-live');
    await db.sequelize.query(
      `UPDATE idempotency_records SET status = 'PROCESSING', owner_token = 'live-executor',
              lease_until = now() + interval '1 hour' WHERE resource_id = $1`,
      { bind: [p.id] },
    );
    const skipped = await entriesOf(p.tenant, true);
    expect(skipped.filter((e) => e.kind === 'charged-more-than-once').map((e) => e.outcome)).to.deep.equal([
      'in-flight',
    ]);
    expect(await refundedIds(p.paymentNo)).to.deep.equal([]);

    await db.sequelize.query(
      `UPDATE idempotency_records SET status = 'SUCCEEDED', owner_token = NULL, lease_until = NULL WHERE resource_id = $1`,
      { bind: [p.id] },
    );
    const repaired = await entriesOf(p.tenant, true);
    expect(repaired.filter((e) => e.kind === 'charged-more-than-once').map((e) => e.outcome)).to.deep.equal([
      'repaired',
    ]);
    const extra = p.charges.map((c) => c.chargeId).filter((c) => c !== p.kept);
    expect(await refundedIds(p.paymentNo)).to.deep.equal(extra);

    expect(await entriesOf(p.tenant, true)).to.deep.equal([]);
    expect(await refundedIds(p.paymentNo)).to.deep.equal(extra);
  });

  it('when the charge the payment records was refunded already, then the other standing charge is kept, not refunded', async () => {
    const p = await chargedTwice('mo-kept');
    await slot.client.refund(p.paymentNo, p.kept);
    const entries = await entriesOf(p.tenant, true);
    expect(entries.filter((e) => e.kind === 'charged-more-than-once')).to.deep.equal([]);
    expect(await refundedIds(p.paymentNo)).to.deep.equal([p.kept]);
    const standing = p.charges.filter((c) => c.chargeId !== p.kept);
    expect(standing).to.have.length(1);
  });
});
