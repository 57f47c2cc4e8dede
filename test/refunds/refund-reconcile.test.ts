import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { BusinessRefund, GatewayClient } from '../../gateway/types.js';
import type { IdempotencyEngine } from '../../idempotency/engine.js';
import { IdempotencyRecord, Refund } from '../../models/index.js';
import { exitCodeFor, type ReconcileDeps, reconcile } from '../../payments/reconcile.js';
import { minutesFromNow, paymentRow, processingRecord } from '../gateway/reconcile-fixtures.js';
import { sharedServer } from '../support/server.js';
import { uniqueTenant } from '../support/tokens.js';

const hex = (n: number) => randomBytes(n).toString('hex');

describe('reconcile: local refunds against the gateway (a gateway that ignores keys, a refund made but not recorded)', () => {
  let sim: GatewaySimulator;
  let gateway: GatewayClient;
  let deps: ReconcileDeps;
  let tenant: string;

  const run = (repair: boolean) => reconcile(deps, { repair, merchantId: tenant });
  const kinds = (r: Awaited<ReturnType<typeof run>>) => [
    ...r.entries.map((e) => [e.kind, e.outcome]),
    ...r.refundEntries.map((e) => [e.kind, e.outcome]),
  ];

  beforeEach(async () => {
    const { services } = await sharedServer();
    sim = await startGatewaySimulator();
    gateway = createGatewayClient({ baseUrl: sim.url, timeoutMs: 5000 });
    deps = { sequelize: services.sequelize, gateway, engine: services.idempotency as IdempotencyEngine };
    tenant = uniqueTenant('rrc');
  });
  afterEach(async () => {
    await gateway.close();
    await sim.close();
  });

  /** A SUCCEEDED payment of 25.00 charged at the simulator, and a PROCESSING refund row of it. */
  async function processingRefund(amount = '10.00') {
    const payment = await paymentRow(tenant, 'PROCESSING');
    const charged = await gateway.charge({ paymentNo: payment.paymentNo, amount: '25.00', currency: 'USD' });
    if (charged.kind !== 'charged') throw new Error(charged.kind);
    await payment.update({ status: 'SUCCEEDED', chargeId: charged.charge.chargeId });
    const refund = await Refund.create({
      id: `re_${hex(12)}`,
      refundNo: `RN${hex(16)}`,
      paymentId: payment.id,
      merchantId: tenant,
      userId: '1',
      merchantOrderNo: payment.merchantOrderNo,
      amount,
      currency: 'USD',
      reason: null,
    });
    const send = async (): Promise<BusinessRefund> => {
      const made = await gateway.refund({
        refundNo: refund.refundNo,
        paymentNo: payment.paymentNo,
        chargeId: charged.charge.chargeId,
        amount,
        currency: 'USD',
      });
      if (made.kind !== 'refunded') throw new Error(made.kind);
      return made.refund;
    };
    return { payment, refund, send };
  }
  const refundedOf = async (paymentId: string) =>
    (
      await deps.sequelize.query<{ a: string }>(
        'SELECT amount_refunded::text AS a FROM payments WHERE id = $1',
        {
          bind: [paymentId],
          type: QueryTypes.SELECT,
        },
      )
    )[0].a;

  it('when a PROCESSING refund was made and its lease ended, then --repair finalises refund, record and amountRefunded through a takeover, query first', async () => {
    const { payment, refund, send } = await processingRefund();
    const made = await send();
    const record = await processingRecord(tenant, refund, minutesFromNow(-1));
    const looked = await run(false);
    expect(kinds(looked)).to.deep.equal([['refund-processing-but-refunded', 'reported']]);
    expect(exitCodeFor(looked)).to.equal(1);
    const repaired = await run(true);
    expect(kinds(repaired)).to.deep.equal([['refund-processing-but-refunded', 'repaired']]);
    expect(exitCodeFor(repaired)).to.equal(0);
    await refund.reload();
    expect([refund.status, refund.gatewayRefundId]).to.deep.equal(['SUCCEEDED', made.refundId]);
    expect(await refundedOf(payment.id)).to.equal('10.00');
    await record.reload();
    expect([record.status, record.httpStatus, record.ownerToken]).to.deep.equal(['SUCCEEDED', 201, null]);
    expect(kinds(await run(true)), 'a second run finds nothing').to.deep.equal([]);
    expect((await gateway.ledger()).refunds, 'never refunds').to.have.length(1);
  });

  it('when a gateway ignoring keys refunded one refundNo twice and no record is open, then --repair finalises the row once and reports the duplicate as unresolved', async () => {
    const { payment, refund, send } = await processingRefund('5.00');
    await gateway.setFaults({ ignoreIdempotencyKey: true });
    await send();
    await send();
    const looked = await run(false);
    expect(kinds(looked)).to.deep.equal([
      ['refund-processing-but-refunded', 'reported'],
      ['refunded-more-than-once', 'reported'],
    ]);
    const repaired = await run(true);
    expect(kinds(repaired)).to.deep.equal([
      ['refund-processing-but-refunded', 'repaired'],
      ['refunded-more-than-once', 'reported'],
    ]);
    expect(exitCodeFor(repaired)).to.equal(1);
    await refund.reload();
    expect(refund.status).to.equal('SUCCEEDED');
    expect(await refundedOf(payment.id), 'the row counts once').to.equal('5.00');
    const again = await run(true);
    expect(kinds(again)).to.deep.equal([['refunded-more-than-once', 'reported']]);
    expect(again.refundEntries[0].gatewayRefundIds).to.have.length(2);
    expect((await gateway.ledger()).refunds, 'reconcile never moves money for a refund').to.have.length(2);
  });

  it('when a SUCCEEDED payment was partly refunded (a business refund), then its charge still stands: no payment mismatch', async () => {
    const { refund, send } = await processingRefund('10.00');
    const made = await send();
    await refund.update({ status: 'SUCCEEDED', gatewayRefundId: made.refundId });
    await deps.sequelize.query('UPDATE payments SET amount_refunded = 10 WHERE id = $1', {
      bind: [refund.paymentId],
    });
    expect(kinds(await run(true))).to.deep.equal([]);
  });

  it('when a refund is resumable (its last attempt certainly refunded nothing), then it is listed: waiting while young, unresolved once older than the limit, never performed', async () => {
    const { refund } = await processingRefund('4.00');
    await refund.update({ resumableSince: minutesFromNow(-1) });
    expect(kinds(await run(true))).to.deep.equal([['refund-resumable', 'waiting']]);
    await refund.update({ resumableSince: minutesFromNow(-120) });
    const old = await run(true);
    expect(kinds(old)).to.deep.equal([['refund-resumable', 'reported']]);
    expect(exitCodeFor(old)).to.equal(1);
    expect((await gateway.ledger()).refunds).to.deep.equal([]);
    await refund.reload();
    expect(refund.status).to.equal('PROCESSING');
  });

  it('when a SUCCEEDED refund has no refund at the gateway, then it is reported and never changed', async () => {
    const { refund } = await processingRefund('3.00');
    await refund.update({ status: 'SUCCEEDED' });
    const report = await run(true);
    expect(kinds(report)).to.deep.equal([['refund-succeeded-but-not-refunded', 'reported']]);
    expect(exitCodeFor(report)).to.equal(1);
    expect(await IdempotencyRecord.count({ where: { resourceId: refund.id } })).to.equal(0);
  });
});
