import { expect } from 'chai';
import { createGatewayClient, GatewayError } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { Charge, GatewayClient } from '../../gateway/types.js';
import type { IdempotencyEngine } from '../../idempotency/engine.js';
import { Order } from '../../models/index.js';
import { exitCodeFor, type ReconcileDeps, reconcile } from '../../payments/reconcile.js';
import { sharedServer } from '../support/server.js';
import { uniqueTenant } from '../support/tokens.js';
import { minutesFromNow, paymentRow, processingRecord } from './reconcile-fixtures.js';

describe('reconcile: local payments against the gateway', () => {
  let sim: GatewaySimulator;
  let gateway: GatewayClient;
  let deps: ReconcileDeps;
  let tenant: string;

  const run = (repair: boolean) => reconcile(deps, { repair, merchantId: tenant });
  const charge = async (paymentNo: string, amount = '25.00'): Promise<Charge> => {
    const outcome = await gateway.charge({ paymentNo, amount, currency: 'USD' });
    if (outcome.kind !== 'charged' && outcome.kind !== 'declined')
      throw new Error(`no charge: ${outcome.kind}`);
    return outcome.charge;
  };

  beforeEach(async () => {
    const { services } = await sharedServer();
    sim = await startGatewaySimulator();
    gateway = createGatewayClient({ baseUrl: sim.url, timeoutMs: 5000 });
    const engine = services.idempotency as IdempotencyEngine;
    deps = { sequelize: services.sequelize, gateway, engine };
    tenant = uniqueTenant('rc');
  });
  afterEach(async () => {
    await gateway.close();
    await sim.close();
  });

  it('when a PROCESSING payment was charged and its executor still holds a live lease, then it is left in flight', async () => {
    const payment = await paymentRow(tenant, 'PROCESSING');
    await charge(payment.paymentNo);
    const record = await processingRecord(tenant, payment, minutesFromNow(10));
    const report = await run(true);
    expect(report.entries.map((e) => [e.kind, e.outcome])).to.deep.equal([
      ['processing-but-charged', 'in-flight'],
    ]);
    expect(exitCodeFor(report)).to.equal(0);
    await payment.reload();
    expect(payment.status).to.equal('PROCESSING');
    await record.reload();
    expect(record.status).to.equal('PROCESSING');
  });

  it('when a PROCESSING payment was charged and its lease ended, then a repair run finalises payment, order and record through a takeover', async () => {
    const payment = await paymentRow(tenant, 'PROCESSING');
    const charged = await charge(payment.paymentNo);
    const record = await processingRecord(tenant, payment, minutesFromNow(-1));
    const looked = await run(false);
    expect(looked.entries.map((e) => [e.kind, e.outcome])).to.deep.equal([
      ['processing-but-charged', 'reported'],
    ]);
    expect(exitCodeFor(looked)).to.equal(1);
    await payment.reload();
    expect(payment.status, 'a report-only run changes nothing').to.equal('PROCESSING');

    const repaired = await run(true);
    expect(repaired.entries.map((e) => [e.kind, e.outcome])).to.deep.equal([
      ['processing-but-charged', 'repaired'],
    ]);
    expect(exitCodeFor(repaired)).to.equal(0);
    await payment.reload();
    expect(payment.status).to.equal('SUCCEEDED');
    expect(payment.chargeId).to.equal(charged.chargeId);
    expect((await Order.findByPk(payment.orderId))?.status).to.equal('PAID');
    await record.reload();
    expect(record.status).to.equal('SUCCEEDED');
    expect(record.ownerToken).to.equal(null);
    expect(record.httpStatus).to.equal(201);
    expect((await run(true)).entries).to.deep.equal([]);
    const ledger = await gateway.ledger();
    expect(
      ledger.charges.filter((c) => c.paymentNo === payment.paymentNo),
      'never charges',
    ).to.have.length(1);
  });

  it('when a SUCCEEDED payment has no charge at the gateway, then it is reported as unresolved and never changed', async () => {
    const payment = await paymentRow(tenant, 'SUCCEEDED', { chargeId: 'ch_never_made' });
    const before = payment.toJSON();
    const report = await run(true);
    expect(report.entries).to.have.length(1);
    expect(report.entries[0]).to.include({
      kind: 'succeeded-but-not-charged',
      paymentNo: payment.paymentNo,
      localStatus: 'SUCCEEDED',
      outcome: 'reported',
    });
    expect(exitCodeFor(report)).to.equal(1);
    await payment.reload();
    expect(payment.toJSON()).to.deep.equal(before);
  });

  it('when a gateway ignoring keys charged one paymentNo twice, then repair refunds only the charge not recorded, once', async () => {
    const payment = await paymentRow(tenant, 'PROCESSING');
    await gateway.setFaults({ ignoreIdempotencyKey: true });
    const first = await charge(payment.paymentNo);
    const second = await charge(payment.paymentNo);
    expect(first.chargeId).to.not.equal(second.chargeId);
    // The payment recorded the second charge: that one is kept, even though it is not the first.
    await payment.update({ status: 'SUCCEEDED', chargeId: second.chargeId });
    const looked = await run(false);
    expect(looked.entries.map((e) => [e.kind, e.chargeIds, e.outcome])).to.deep.equal([
      ['charged-more-than-once', [first.chargeId], 'reported'],
    ]);
    expect((await gateway.ledger()).refunds).to.deep.equal([]);

    const repaired = await run(true);
    expect(repaired.entries.map((e) => [e.kind, e.outcome])).to.deep.equal([
      ['charged-more-than-once', 'repaired'],
    ]);
    const refunds = () => gateway.ledger().then((l) => l.refunds.map((r) => [r.paymentNo, r.chargeId]));
    expect(await refunds()).to.deep.equal([[payment.paymentNo, first.chargeId]]);
    const again = await run(true);
    expect(again.entries).to.deep.equal([]);
    expect(await refunds(), 'an already refunded charge is not refunded again').to.have.length(1);
  });

  it('when every payment matches the gateway, then the report is empty and clean', async () => {
    const succeeded = await paymentRow(tenant, 'SUCCEEDED');
    await succeeded.update({ chargeId: (await charge(succeeded.paymentNo)).chargeId });
    const failed = await paymentRow(tenant, 'FAILED');
    await gateway.setFaults({ declineRate: 1 });
    await failed.update({ chargeId: (await charge(failed.paymentNo)).chargeId });
    await paymentRow(tenant, 'PROCESSING'); // not charged yet: nothing to reconcile
    const report = await run(true);
    expect(report).to.include({
      source: 'ledger',
      duplicatesDetectable: true,
      notice: null,
      payments: 3,
      charges: 2,
    });
    expect(report.entries).to.deep.equal([]);
    expect(exitCodeFor(report)).to.equal(0);
    const later = await reconcile(deps, { repair: false, merchantId: tenant, since: minutesFromNow(1) });
    expect(later.payments, '--since leaves older payments out').to.equal(0);
  });

  it('when a charge has another amount or an unknown paymentNo, then both are reported and nothing is repaired', async () => {
    const payment = await paymentRow(tenant, 'SUCCEEDED');
    const wrong = await charge(payment.paymentNo, '26.00');
    await payment.update({ chargeId: wrong.chargeId });
    const stray = await charge(`PN-unknown-${tenant}`);
    // No merchant filter: a charge of an unknown paymentNo cannot be attributed to one merchant.
    const report = await reconcile(deps, { repair: true });
    const mine = report.entries.filter(
      (e) => e.paymentNo === payment.paymentNo || e.paymentNo === stray.paymentNo,
    );
    expect(mine.map((e) => [e.kind, e.paymentNo, e.outcome])).to.deep.equal([
      ['amount-mismatch', payment.paymentNo, 'reported'],
      ['charge-without-payment', stray.paymentNo, 'reported'],
    ]);
    expect((await gateway.ledger()).refunds).to.deep.equal([]);
  });

  it('when the gateway offers no ledger, then each payment is queried and the report says duplicates are undetectable', async () => {
    const payment = await paymentRow(tenant, 'SUCCEEDED');
    await gateway.setFaults({ ignoreIdempotencyKey: true });
    await payment.update({ chargeId: (await charge(payment.paymentNo)).chargeId });
    await charge(payment.paymentNo);
    // What the client throws when a real gateway answers GET /ledger with 404.
    const noLedger = async () => {
      throw new GatewayError('gateway ledger failed: HTTP 404', 404);
    };
    const queryOnly = Object.assign(Object.create(gateway) as GatewayClient, { ledger: noLedger });
    const report = await reconcile({ ...deps, gateway: queryOnly }, { repair: true, merchantId: tenant });
    expect(report).to.include({ source: 'query', duplicatesDetectable: false, payments: 1, charges: 1 });
    expect(report.notice).to.match(/duplicate charges .* could not be detected/);
    expect(report.entries, 'the second charge is invisible to a query').to.deep.equal([]);
  });
});
