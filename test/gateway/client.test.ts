import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createGatewayClient, GatewayError } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient } from '../../gateway/types.js';

// Short where a time-out is the point of the test; generous elsewhere so that a loaded CI machine
// never turns an expected answer into a time-out.
const TIMEOUT_MS = 300;
const PATIENT_MS = 5000;
const newPaymentNo = () => `pay_${randomUUID()}`;
const chargeRequest = (paymentNo = newPaymentNo()) => ({ paymentNo, amount: '10.00', currency: 'USD' });

describe('gateway client against the simulator', () => {
  let sim: GatewaySimulator;
  let client: GatewayClient;
  let impatient: GatewayClient;

  beforeEach(async () => {
    sim = await startGatewaySimulator();
    client = createGatewayClient({ baseUrl: sim.url, timeoutMs: PATIENT_MS });
    impatient = createGatewayClient({ baseUrl: sim.url, timeoutMs: TIMEOUT_MS });
  });
  afterEach(async () => {
    await client.close();
    await impatient.close();
    await sim.close();
  });

  it('when a payment is charged twice with one paymentNo, then both outcomes carry one charge and the ledger has one entry', async () => {
    const req = chargeRequest();
    const first = await client.charge(req);
    const second = await client.charge(req);
    expect(first.kind).to.equal('charged');
    expect(second).to.deep.equal(first);
    const { charges } = await client.ledger();
    expect(charges).to.have.length(1);
    expect(first).to.deep.equal({ kind: 'charged', charge: charges[0] });
    expect(charges[0]).to.include({
      paymentNo: req.paymentNo,
      amount: '10.00',
      currency: 'USD',
      status: 'SUCCEEDED',
    });
  });

  it('when the gateway declines, then the outcome is declined with the recorded charge', async () => {
    await client.setFaults({ declineRate: 1 });
    const outcome = await client.charge(chargeRequest());
    expect(outcome.kind).to.equal('declined');
    expect((await client.ledger()).charges).to.deep.equal([outcome.kind === 'declined' && outcome.charge]);
  });

  it('when the gateway answers 500, then the outcome is not-charged/server-error and the ledger is empty', async () => {
    await client.setFaults({ errorRate: 1 });
    expect(await client.charge(chargeRequest())).to.deep.equal({
      kind: 'not-charged',
      reason: 'server-error',
    });
    expect((await client.ledger()).charges).to.deep.equal([]);
  });

  it('when the gateway charges and never answers, then the outcome is unknown/timeout and query() finds the charge', async () => {
    await client.setFaults({ timeoutAfterChargeRate: 1 });
    const req = chargeRequest();
    expect(await impatient.charge(req)).to.deep.equal({ kind: 'unknown', reason: 'timeout' });
    const { charges } = await client.ledger();
    expect(charges.map((c) => c.paymentNo)).to.deep.equal([req.paymentNo]);
    expect(await client.query(req.paymentNo)).to.deep.equal({ kind: 'found', charge: charges[0] });
  });

  it('when the gateway answers later than timeoutMs, then the outcome is unknown/timeout and the charge exists', async () => {
    await client.setFaults({ latencyMs: TIMEOUT_MS * 4 });
    const req = chargeRequest();
    expect(await impatient.charge(req)).to.deep.equal({ kind: 'unknown', reason: 'timeout' });
    expect((await client.query(req.paymentNo)).kind).to.equal('found');
  });

  it('when the gateway answers within timeoutMs despite latency, then the outcome is charged', async () => {
    await client.setFaults({ latencyMs: 20 });
    expect((await client.charge(chargeRequest())).kind).to.equal('charged');
  });

  it('when the gateway charges and resets the connection, then the outcome is unknown/reset and the ledger has the charge', async () => {
    await client.setFaults({ resetAfterChargeRate: 1 });
    const req = chargeRequest();
    expect(await client.charge(req)).to.deep.equal({ kind: 'unknown', reason: 'reset' });
    expect((await client.ledger()).charges.map((c) => c.paymentNo)).to.deep.equal([req.paymentNo]);
    expect((await client.query(req.paymentNo)).kind).to.equal('found');
  });

  it('when the gateway ignores the idempotency key, then two charges of one paymentNo are two ledger entries', async () => {
    await client.setFaults({ ignoreIdempotencyKey: true });
    const req = chargeRequest();
    const first = await client.charge(req);
    const second = await client.charge(req);
    const { charges } = await client.ledger();
    expect(charges).to.have.length(2);
    expect(first).to.deep.equal({ kind: 'charged', charge: charges[0] });
    expect(second).to.deep.equal({ kind: 'charged', charge: charges[1] });
  });

  it('when a duplicate charge is refunded, then the refund is in the ledger', async () => {
    await client.setFaults({ ignoreIdempotencyKey: true });
    const req = chargeRequest();
    await client.charge(req);
    const duplicate = await client.charge(req);
    if (duplicate.kind !== 'charged') throw new Error(`expected a charge, got ${duplicate.kind}`);
    const refund = await client.refund(req.paymentNo, duplicate.charge.chargeId);
    expect(refund).to.include({ paymentNo: req.paymentNo, chargeId: duplicate.charge.chargeId });
    expect((await client.ledger()).refunds).to.deep.equal([refund]);
  });

  it('when a refund names no charge, then refund() throws with the status', async () => {
    const err = await client.refund(newPaymentNo(), 'ch_00').catch((e: unknown) => e);
    expect(err).to.be.instanceOf(GatewayError);
    expect((err as GatewayError).status).to.equal(404);
  });

  it('when nothing was charged for a paymentNo, then query() says none', async () => {
    expect(await client.query(newPaymentNo())).to.deep.equal({ kind: 'none' });
  });

  it('when the charge request is invalid (4xx), then charge() throws with the status and nothing is charged', async () => {
    const err = await client.charge({ ...chargeRequest(), amount: 'ten' }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(GatewayError);
    expect((err as GatewayError).status).to.equal(400);
    expect((err as Error).message).to.include('400');
    expect((await client.ledger()).charges).to.deep.equal([]);
  });

  it('when setFaults() gets an invalid set, then it throws with 400', async () => {
    const err = await client.setFaults({ errorRate: 2 }).catch((e: unknown) => e);
    expect((err as GatewayError).status).to.equal(400);
  });
});

describe('gateway client against an unreachable or misbehaving gateway', () => {
  let client: GatewayClient | undefined;
  let stub: http.Server | undefined;
  afterEach(async () => {
    await client?.close();
    stub?.closeAllConnections();
    await new Promise((resolve) => (stub ? stub.close(resolve) : resolve(undefined)));
    client = undefined;
    stub = undefined;
  });

  /** A gateway that answers every request with the given handler (or never, when it does nothing). */
  async function startStub(handler: http.RequestListener): Promise<string> {
    stub = http.createServer(handler);
    await new Promise<void>((resolve) => stub!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
  }

  it('when the gateway is stopped, then charge() says not-charged/refused and query() unavailable', async () => {
    const sim = await startGatewaySimulator();
    await sim.close();
    client = createGatewayClient({ baseUrl: sim.url, timeoutMs: PATIENT_MS });
    expect(await client.charge(chargeRequest())).to.deep.equal({ kind: 'not-charged', reason: 'refused' });
    expect(await client.query(newPaymentNo())).to.deep.equal({ kind: 'unavailable' });
  });

  it('when the gateway answers 200 with a body that is not a charge, then the outcome is unknown/bad-response', async () => {
    client = createGatewayClient({
      baseUrl: await startStub((_req, res) => res.end('{"ok":')),
      timeoutMs: PATIENT_MS,
    });
    expect(await client.charge(chargeRequest())).to.deep.equal({ kind: 'unknown', reason: 'bad-response' });
    expect(await client.query(newPaymentNo())).to.deep.equal({ kind: 'unavailable' });
  });

  it('when the gateway answers 200 with the charge of another paymentNo, then the outcome is unknown/bad-response', async () => {
    const other = {
      paymentNo: 'other',
      chargeId: 'ch_1',
      amount: '10.00',
      currency: 'USD',
      status: 'SUCCEEDED',
    };
    client = createGatewayClient({
      baseUrl: await startStub((_req, res) => res.end(JSON.stringify(other))),
      timeoutMs: PATIENT_MS,
    });
    expect(await client.charge(chargeRequest())).to.deep.equal({ kind: 'unknown', reason: 'bad-response' });
  });

  it('when the gateway answers an unexpected status (302), then the outcome is unknown/bad-response', async () => {
    const baseUrl = await startStub((_req, res) => res.writeHead(302, { location: '/elsewhere' }).end());
    client = createGatewayClient({ baseUrl, timeoutMs: PATIENT_MS });
    expect(await client.charge(chargeRequest())).to.deep.equal({ kind: 'unknown', reason: 'bad-response' });
  });

  it('when the gateway never answers a query or a ledger read, then query() is unavailable and ledger() throws', async () => {
    client = createGatewayClient({ baseUrl: await startStub(() => {}), timeoutMs: TIMEOUT_MS });
    expect(await client.query(newPaymentNo())).to.deep.equal({ kind: 'unavailable' });
    expect(((await client.ledger().catch((e: unknown) => e)) as Error).message).to.include('timeout');
  });

  it('when the gateway answers 503 to a query, then query() is unavailable', async () => {
    client = createGatewayClient({
      baseUrl: await startStub((_req, res) => res.writeHead(503).end()),
      timeoutMs: PATIENT_MS,
    });
    expect(await client.query(newPaymentNo())).to.deep.equal({ kind: 'unavailable' });
    expect(await client.charge(chargeRequest())).to.deep.equal({
      kind: 'not-charged',
      reason: 'server-error',
    });
  });

  it('when the gateway drops the connection in the middle of the answer, then the outcome is unknown/reset', async () => {
    const baseUrl = await startStub((req, res) => {
      res.writeHead(200, { 'content-length': 1000 });
      res.write('{"paymentNo":');
      setTimeout(() => req.socket.destroy(), 10);
    });
    client = createGatewayClient({ baseUrl, timeoutMs: PATIENT_MS });
    expect(await client.charge(chargeRequest())).to.deep.equal({ kind: 'unknown', reason: 'reset' });
  });

  it('when the gateway answers a refund with the refund of another refundNo or with 503, then unknown/bad-response or not-refunded/server-error', async () => {
    const req = { refundNo: 'ref_1', paymentNo: 'pay_1', chargeId: 'ch_1', amount: '1.00', currency: 'USD' };
    const other = { ...req, refundNo: 'ref_2', refundId: 're_2', status: 'SUCCEEDED' };
    let status = 200;
    client = createGatewayClient({
      baseUrl: await startStub((_req, res) => res.writeHead(status).end(JSON.stringify(other))),
      timeoutMs: PATIENT_MS,
    });
    expect(await client.refund(req)).to.deep.equal({ kind: 'unknown', reason: 'bad-response' });
    expect(await client.queryRefund('ref_1')).to.deep.equal({ kind: 'unavailable' });
    status = 503;
    expect(await client.refund(req)).to.deep.equal({ kind: 'not-refunded', reason: 'server-error' });
    expect(await client.queryRefund('ref_1')).to.deep.equal({ kind: 'unavailable' });
  });

  it('when the gateway sits under a path prefix, then requests go below it', async () => {
    const paths: string[] = [];
    const baseUrl = await startStub((req, res) => {
      paths.push(req.url ?? '');
      res.writeHead(404).end();
    });
    client = createGatewayClient({ baseUrl: `${baseUrl}/gw/`, timeoutMs: PATIENT_MS });
    expect(await client.query('a b')).to.deep.equal({ kind: 'none' });
    expect(await client.queryRefund('r/1')).to.deep.equal({ kind: 'none' });
    expect(paths).to.deep.equal(['/gw/charges/a%20b', '/gw/refunds/r%2F1']);
  });
});
