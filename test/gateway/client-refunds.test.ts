import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createGatewayClient, GatewayError } from '../../gateway/client.js';
import type { Charge, GatewayClient, RefundRequest } from '../../gateway/types.js';
import { stablePort } from '../support/stable-port.js';
import { type SimulatorProcess, startSimulatorProcess } from './simulator-process.js';

// Short where a time-out is the point of the test; generous elsewhere.
const TIMEOUT_MS = 300;
const PATIENT_MS = 5000;

describe('gateway client: business refunds against the simulator process', () => {
  let sim: SimulatorProcess;
  let client: GatewayClient;
  let impatient: GatewayClient;

  before(async () => {
    sim = await startSimulatorProcess();
    client = createGatewayClient({ baseUrl: sim.url, timeoutMs: PATIENT_MS });
    impatient = createGatewayClient({ baseUrl: sim.url, timeoutMs: TIMEOUT_MS });
  });
  after(async () => {
    await client?.close();
    await impatient?.close();
    await sim?.stop();
  });
  // One process for the file: every test starts from no faults and uses its own paymentNo.
  beforeEach(() => client.setFaults({}));

  async function charged(amount = '10.00'): Promise<Charge> {
    const outcome = await client.charge({ paymentNo: `pay_${randomUUID()}`, amount, currency: 'USD' });
    if (outcome.kind !== 'charged') throw new Error(`expected a charge, got ${outcome.kind}`);
    return outcome.charge;
  }
  const refundOf = (c: Charge, amount = c.amount): RefundRequest => ({
    refundNo: `ref_${randomUUID()}`,
    paymentNo: c.paymentNo,
    chargeId: c.chargeId,
    amount,
    currency: c.currency,
  });
  const refundsOf = async (c: Charge) =>
    (await client.ledger()).refunds.filter((r) => r.chargeId === c.chargeId);

  it('when a refund is sent twice with one refundNo, then both outcomes carry one refund, found by queryRefund, one ledger entry', async () => {
    const c = await charged();
    const req = refundOf(c);
    const first = await client.refund(req);
    expect(first.kind).to.equal('refunded');
    expect(await client.refund(req)).to.deep.equal(first);
    const ledger = await refundsOf(c);
    expect(ledger).to.have.length(1);
    expect(first).to.deep.equal({ kind: 'refunded', refund: ledger[0] });
    expect(ledger[0]).to.include({ ...req, status: 'SUCCEEDED' });
    expect(await client.queryRefund(req.refundNo)).to.deep.equal({ kind: 'found', refund: ledger[0] });
  });

  it('when partial refunds add up to the charge, then each succeeds and one cent more is declined', async () => {
    const c = await charged('10.00');
    expect((await client.refund(refundOf(c, '3.00'))).kind).to.equal('refunded');
    expect((await client.refund(refundOf(c, '6.99'))).kind).to.equal('refunded');
    expect((await client.refund(refundOf(c, '0.02'))).kind).to.equal('declined');
    expect((await client.refund(refundOf(c, '0.01'))).kind).to.equal('refunded');
    expect((await refundsOf(c)).map((r) => [r.amount, r.status])).to.deep.equal([
      ['3.00', 'SUCCEEDED'],
      ['6.99', 'SUCCEEDED'],
      ['0.02', 'DECLINED'],
      ['0.01', 'SUCCEEDED'],
    ]);
  });

  it('when five refunds of 4.00 of one 10.00 charge arrive at once, then exactly two succeed', async () => {
    const c = await charged('10.00');
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => client.refund(refundOf(c, '4.00'))));
    expect(outcomes.filter((o) => o.kind === 'refunded')).to.have.length(2);
    expect(outcomes.filter((o) => o.kind === 'declined')).to.have.length(3);
    expect((await refundsOf(c)).filter((r) => r.status === 'SUCCEEDED')).to.have.length(2);
  });

  it('when a refund exceeds the charge, then it is declined, recorded, and the whole amount stays refundable', async () => {
    const c = await charged('10.00');
    const over = await client.refund(refundOf(c, '10.01'));
    expect(over.kind).to.equal('declined');
    expect((await client.refund(refundOf(c))).kind).to.equal('refunded');
    expect((await refundsOf(c)).map((r) => r.status)).to.deep.equal(['DECLINED', 'SUCCEEDED']);
  });

  it('when the gateway ignores the idempotency key, then one refundNo refunds twice (within the charge) and queryRefund answers the first', async () => {
    const c = await charged('10.00');
    await client.setFaults({ ignoreIdempotencyKey: true });
    const req = refundOf(c, '4.00');
    const first = await client.refund(req);
    const second = await client.refund(req);
    const ledger = await refundsOf(c);
    expect(ledger.map((r) => [r.refundNo, r.status])).to.deep.equal([
      [req.refundNo, 'SUCCEEDED'],
      [req.refundNo, 'SUCCEEDED'],
    ]);
    expect([first, second]).to.deep.equal(ledger.map((refund) => ({ kind: 'refunded', refund })));
    expect(await client.queryRefund(req.refundNo)).to.deep.equal({ kind: 'found', refund: ledger[0] });
    expect((await client.refund(req)).kind).to.equal('declined');
  });

  it('when the gateway declines, then the outcome is declined and a replay returns it', async () => {
    const req = refundOf(await charged());
    await client.setFaults({ declineRate: 1 });
    const outcome = await client.refund(req);
    expect(outcome.kind).to.equal('declined');
    await client.setFaults({});
    expect(await client.refund(req)).to.deep.equal(outcome);
  });

  it('when the gateway answers 500, then not-refunded/server-error, nothing recorded, and queryRefund says none', async () => {
    const c = await charged();
    const req = refundOf(c);
    await client.setFaults({ errorRate: 1 });
    expect(await client.refund(req)).to.deep.equal({ kind: 'not-refunded', reason: 'server-error' });
    expect(await refundsOf(c)).to.deep.equal([]);
    expect(await client.queryRefund(req.refundNo)).to.deep.equal({ kind: 'none' });
  });

  it('when errorRate is 1 but the refundNo was already refunded, then the replay still returns the refund', async () => {
    const req = refundOf(await charged());
    const first = await client.refund(req);
    await client.setFaults({ errorRate: 1 });
    expect(await client.refund(req)).to.deep.equal(first);
  });

  for (const [fault, reason] of [
    [{ timeoutAfterChargeRate: 1 }, 'timeout'],
    [{ latencyMs: TIMEOUT_MS * 4 }, 'timeout'],
    [{ resetAfterChargeRate: 1 }, 'reset'],
  ] as const) {
    it(`when the gateway refunds under ${JSON.stringify(fault)}, then unknown/${reason} and queryRefund finds the refund`, async () => {
      const c = await charged();
      const req = refundOf(c);
      await client.setFaults(fault);
      expect(await impatient.refund(req)).to.deep.equal({ kind: 'unknown', reason });
      const ledger = await refundsOf(c);
      expect(ledger.map((r) => r.refundNo)).to.deep.equal([req.refundNo]);
      expect(await client.queryRefund(req.refundNo)).to.deep.equal({ kind: 'found', refund: ledger[0] });
    });
  }

  it('when the caller aborts before sending, then not-refunded/aborted and nothing is recorded', async () => {
    const c = await charged();
    expect(await client.refund(refundOf(c), AbortSignal.abort())).to.deep.equal({
      kind: 'not-refunded',
      reason: 'aborted',
    });
    expect(await refundsOf(c)).to.deep.equal([]);
  });

  it('when the caller aborts after the gateway recorded the refund, then unknown/aborted', async () => {
    const c = await charged();
    await client.setFaults({ latencyMs: 60000 });
    const abort = new AbortController();
    const pending = client.refund(refundOf(c), abort.signal);
    // Aborted only once the refund is known to be recorded: the outcome must not be "not refunded".
    while ((await refundsOf(c)).length === 0) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    expect(await pending).to.deep.equal({ kind: 'unknown', reason: 'aborted' });
  });

  it('when a refund names no charge, another currency, or reuses a refundNo differently, then refund() throws the 4xx and records nothing', async () => {
    const c = await charged();
    const req = refundOf(c, '1.00');
    const status = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => (e instanceof GatewayError ? e.status : e),
      );
    expect(await status(client.refund({ ...req, chargeId: 'ch_none' }))).to.equal(404);
    expect(await status(client.refund({ ...req, currency: 'EUR' }))).to.equal(409);
    await client.refund(req);
    expect(await status(client.refund({ ...req, amount: '2.00' }))).to.equal(409);
    expect((await refundsOf(c)).map((r) => r.amount)).to.deep.equal(['1.00']);
  });

  it('when nothing was refunded under a refundNo, then queryRefund says none', async () => {
    expect(await client.queryRefund(`ref_${randomUUID()}`)).to.deep.equal({ kind: 'none' });
  });

  it('when the gateway is not listening, then not-refunded/refused and queryRefund is unavailable', async () => {
    const down = createGatewayClient({
      baseUrl: `http://127.0.0.1:${await stablePort()}`,
      timeoutMs: PATIENT_MS,
    });
    const req = refundOf(await charged());
    expect(await down.refund(req)).to.deep.equal({ kind: 'not-refunded', reason: 'refused' });
    expect(await down.queryRefund(req.refundNo)).to.deep.equal({ kind: 'unavailable' });
    await down.close();
  });
});
