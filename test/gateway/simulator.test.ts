import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { Charge, Ledger } from '../../gateway/types.js';
import { stablePort } from '../support/stable-port.js';

// biome-ignore lint/suspicious/noExplicitAny: answers are inspected structurally by chai
type Answer = { status: number; body: any; headers: Headers };

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || body === undefined ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers } as Answer;
}

const newPaymentNo = () => `pay_${randomUUID()}`;

describe('gateway simulator', () => {
  let sim: GatewaySimulator;
  const charge = (paymentNo: string, extra: Record<string, unknown> = {}, key: string | null = paymentNo) =>
    call(
      sim.url,
      'POST',
      '/charges',
      { paymentNo, amount: '10.00', currency: 'USD', ...extra },
      key ? { 'idempotency-key': key } : {},
    );
  const ledger = async () => (await call(sim.url, 'GET', '/ledger')).body as Ledger;
  const setFaults = (faults: unknown) => call(sim.url, 'PUT', '/faults', faults);

  beforeEach(async () => {
    sim = await startGatewaySimulator();
  });
  afterEach(async () => {
    await sim.close();
  });

  it('when a charge is posted twice with the same key, then the replay returns it unchanged and the ledger has one entry', async () => {
    const paymentNo = newPaymentNo();
    const first = await charge(paymentNo);
    const second = await charge(paymentNo);
    expect(first.status).to.equal(200);
    expect(first.body).to.include({ paymentNo, amount: '10.00', currency: 'USD', status: 'SUCCEEDED' });
    expect(first.body.chargeId).to.match(/^ch_[0-9a-f]+$/);
    expect(second.body).to.deep.equal(first.body);
    expect((await ledger()).charges).to.deep.equal([first.body]);
    expect((await call(sim.url, 'GET', `/charges/${paymentNo}`)).body).to.deep.equal(first.body);
  });

  it('when the same key comes back with another amount, then 409 and no second charge', async () => {
    const paymentNo = newPaymentNo();
    await charge(paymentNo);
    expect((await charge(paymentNo, { amount: '11.00' })).status).to.equal(409);
    expect((await ledger()).charges).to.have.length(1);
  });

  it('when an amount has fewer decimals, then it is recorded with two', async () => {
    expect((await charge(newPaymentNo(), { amount: '7.5' })).body.amount).to.equal('7.50');
  });

  it('when the Idempotency-Key is missing or differs from paymentNo, then 400 and nothing is charged', async () => {
    expect((await charge(newPaymentNo(), {}, null)).status).to.equal(400);
    expect((await charge(newPaymentNo(), {}, 'another-key')).status).to.equal(400);
    expect((await ledger()).charges).to.deep.equal([]);
  });

  for (const [name, extra] of [
    ['amount is not a decimal string', { amount: 'ten' }],
    ['amount is a number', { amount: 10 }],
    ['amount is zero', { amount: '0.00' }],
    ['currency is lower case', { currency: 'usd' }],
    ['paymentNo is empty', { paymentNo: '' }],
    ['paymentNo is over 100 characters', { paymentNo: 'p'.repeat(101) }],
  ] as const) {
    it(`when the ${name}, then 400 with a JSON error and nothing is charged`, async () => {
      const paymentNo = 'paymentNo' in extra ? extra.paymentNo : newPaymentNo();
      const answer = await charge(paymentNo, extra);
      expect(answer.status).to.equal(400);
      expect(answer.body.error).to.be.a('string');
      expect((await ledger()).charges).to.deep.equal([]);
    });
  }

  it('when the body is malformed JSON, then 400 with a JSON error', async () => {
    const answer = await call(sim.url, 'POST', '/charges', '{"paymentNo":', { 'idempotency-key': 'x' });
    expect(answer.status).to.equal(400);
    expect(answer.body.error).to.match(/JSON/);
  });

  it('when a path is unknown, then 404 JSON; when a method is wrong, then 405 with Allow', async () => {
    const unknown = await call(sim.url, 'GET', '/nope');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.be.a('string');
    const wrongMethod = await call(sim.url, 'DELETE', '/faults');
    expect(wrongMethod.status).to.equal(405);
    expect(wrongMethod.headers.get('allow')).to.equal('GET, PUT');
  });

  it('when no charge was made for a paymentNo, then GET /charges/{paymentNo} answers 404', async () => {
    expect((await call(sim.url, 'GET', `/charges/${newPaymentNo()}`)).status).to.equal(404);
  });

  it('when declineRate is 1, then the charge is DECLINED, recorded, and replays return it', async () => {
    await setFaults({ declineRate: 1 });
    const paymentNo = newPaymentNo();
    const first = await charge(paymentNo);
    await setFaults({});
    const replay = await charge(paymentNo);
    expect(first.body.status).to.equal('DECLINED');
    expect(replay.body).to.deep.equal(first.body);
    expect((await ledger()).charges).to.deep.equal([first.body]);
  });

  it('when errorRate is 1, then 500 and the ledger stays empty', async () => {
    await setFaults({ errorRate: 1 });
    const answer = await charge(newPaymentNo());
    expect(answer.status).to.equal(500);
    expect((await ledger()).charges).to.deep.equal([]);
  });

  it('when errorRate is 1 but the key was already charged, then the replay still returns the charge', async () => {
    const paymentNo = newPaymentNo();
    const first = await charge(paymentNo);
    await setFaults({ errorRate: 1 });
    expect((await charge(paymentNo)).body).to.deep.equal(first.body);
  });

  it('when ignoreIdempotencyKey is on, then two POSTs make two charges and GET returns the first', async () => {
    await setFaults({ ignoreIdempotencyKey: true });
    const paymentNo = newPaymentNo();
    const first = (await charge(paymentNo)).body as Charge;
    const second = (await charge(paymentNo)).body as Charge;
    expect(second.chargeId).not.to.equal(first.chargeId);
    expect((await ledger()).charges).to.deep.equal([first, second]);
    expect((await call(sim.url, 'GET', `/charges/${paymentNo}`)).body).to.deep.equal(first);
  });

  it('when a charge is refunded twice, then the ledger has one refund and both answers carry its id', async () => {
    const paymentNo = newPaymentNo();
    const { chargeId } = (await charge(paymentNo)).body as Charge;
    const first = await call(sim.url, 'POST', '/refunds', { paymentNo, chargeId });
    const again = await call(sim.url, 'POST', '/refunds', { paymentNo, chargeId });
    expect(first.status).to.equal(200);
    expect(first.body.refundId).to.match(/^re_[0-9a-f]+$/);
    expect(again.body).to.deep.equal(first.body);
    expect((await ledger()).refunds).to.deep.equal([{ paymentNo, chargeId, refundId: first.body.refundId }]);
  });

  it('when a refund names no charge, then 404; when it names a declined one, then 409', async () => {
    expect((await call(sim.url, 'POST', '/refunds', { paymentNo: 'p', chargeId: 'ch_0' })).status).to.equal(
      404,
    );
    await setFaults({ declineRate: 1 });
    const declined = (await charge(newPaymentNo())).body as Charge;
    const answer = await call(sim.url, 'POST', '/refunds', {
      paymentNo: declined.paymentNo,
      chargeId: declined.chargeId,
    });
    expect(answer.status).to.equal(409);
    expect((await ledger()).refunds).to.deep.equal([]);
  });

  for (const bad of [
    { errorRate: 1.5 },
    { declineRate: -0.1 },
    { resetAfterChargeRate: '0.5' },
    { timeoutAfterChargeRate: null },
    { latencyMs: 60001 },
    { latencyMs: 1.5 },
    { ignoreIdempotencyKey: 'yes' },
    { errorrate: 1 },
    [],
  ]) {
    it(`when PUT /faults gets ${JSON.stringify(bad)}, then 400 and the active set is unchanged`, async () => {
      await setFaults({ declineRate: 0.25 });
      const answer = await setFaults(bad);
      expect(answer.status).to.equal(400);
      expect(answer.body.error).to.be.a('string');
      expect((await call(sim.url, 'GET', '/faults')).body).to.deep.equal({ declineRate: 0.25 });
    });
  }

  it('when PUT /faults is sent twice, then the second set replaces the first and {} clears all', async () => {
    const first = await setFaults({ errorRate: 1, latencyMs: 10, ignoreIdempotencyKey: true });
    expect(first.body).to.deep.equal({ errorRate: 1, latencyMs: 10, ignoreIdempotencyKey: true });
    expect((await setFaults({ declineRate: 0.5 })).body).to.deep.equal({ declineRate: 0.5 });
    expect((await call(sim.url, 'GET', '/faults')).body).to.deep.equal({ declineRate: 0.5 });
    expect((await setFaults({})).body).to.deep.equal({});
    expect((await charge(newPaymentNo())).body.status).to.equal('SUCCEEDED');
  });

  it('when a charge hangs (timeoutAfterChargeRate 1), then close() still ends and the request fails', async () => {
    await setFaults({ timeoutAfterChargeRate: 1 });
    const paymentNo = newPaymentNo();
    const body = JSON.stringify({ paymentNo, amount: '1.00', currency: 'EUR' });
    const failed = new Promise<Error>((resolve) => {
      const req = http.request(`${sim.url}/charges`, {
        method: 'POST',
        headers: { 'idempotency-key': paymentNo, 'content-type': 'application/json' },
      });
      req.on('response', () => resolve(new Error('unexpected answer')));
      req.on('error', resolve);
      req.end(body);
    });
    // Wait until the charge is recorded, so the request is known to be hanging before closing.
    while ((await ledger()).charges.length === 0) await new Promise((r) => setTimeout(r, 10));
    await sim.close();
    expect((await failed).message).to.match(/socket hang up|ECONNRESET/);
  });
});

describe('gateway simulator process (npm run gateway)', () => {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  let child: ChildProcess | undefined;
  afterEach(() => {
    if (child && child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
    child = undefined;
  });

  function run(env: Record<string, string>) {
    child = spawn(process.execPath, ['--import', 'tsx', 'server/gateway-cli.ts'], {
      cwd: root,
      env: { ...process.env, ...env },
    });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    return { exited, out: () => out, err: () => err };
  }

  it('when GATEWAY_PORT is not a port, then it prints one line naming GATEWAY_PORT and exits 1', async () => {
    const proc = run({ GATEWAY_PORT: 'abc' });
    expect(await proc.exited).to.equal(1);
    expect(proc.err().trim().split('\n')).to.have.length(1);
    expect(proc.err()).to.include('GATEWAY_PORT');
  });

  it('when started on a free port, then it prints its URL, serves the contract and exits 0 on SIGTERM', async () => {
    const port = await stablePort();
    const proc = run({ GATEWAY_PORT: String(port) });
    while (!proc.out().includes('\n')) await new Promise((r) => setTimeout(r, 20));
    expect(proc.out().trim()).to.include(`http://127.0.0.1:${port}`);
    expect((await call(`http://127.0.0.1:${port}`, 'GET', '/ledger')).body).to.deep.equal({
      charges: [],
      refunds: [],
    });
    child!.kill('SIGTERM');
    expect(await proc.exited).to.equal(0);
  });
});
