import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Charge, Ledger } from '../../gateway/types.js';
import { type SimulatorProcess, startSimulatorProcess } from './simulator-process.js';

// biome-ignore lint/suspicious/noExplicitAny: answers are inspected structurally by chai
type Answer = { status: number; body: any; headers: Headers };

describe('gateway simulator process: POST /refunds and GET /refunds/{refundNo} over raw HTTP', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSimulatorProcess();
  });
  after(() => sim?.stop());
  beforeEach(() => call('PUT', '/faults', {}));

  async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(sim.url + path, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' || body === undefined ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers } as Answer;
  }
  const ledger = async () => (await call('GET', '/ledger')).body as Ledger;
  const refundsOf = async (c: Charge) => (await ledger()).refunds.filter((r) => r.chargeId === c.chargeId);

  async function charge(opts: { declined?: boolean } = {}): Promise<Charge> {
    await call('PUT', '/faults', opts.declined ? { declineRate: 1 } : {});
    const paymentNo = `pay_${randomUUID()}`;
    const body = { paymentNo, amount: '10.00', currency: 'USD' };
    const answer = await call('POST', '/charges', body, { 'idempotency-key': paymentNo });
    await call('PUT', '/faults', {});
    return answer.body as Charge;
  }
  const business = (c: Charge, extra: Record<string, unknown> = {}) => ({
    refundNo: `ref_${randomUUID()}`,
    paymentNo: c.paymentNo,
    chargeId: c.chargeId,
    amount: '2.50',
    currency: 'USD',
    ...extra,
  });
  /** A POST /refunds with `Idempotency-Key: key`, or with none when key is null. */
  const postRefund = (body: Record<string, unknown>, key: string | null = body.refundNo as string) =>
    call('POST', '/refunds', body, key === null ? {} : { 'idempotency-key': key });

  it('when a business refund is made, then the answer, GET /refunds/{refundNo} and the ledger entry agree', async () => {
    const c = await charge();
    const req = business(c, { amount: '2.5' });
    const answer = await postRefund(req);
    expect(answer.status).to.equal(200);
    expect(answer.body).to.deep.equal({
      ...req,
      amount: '2.50',
      refundId: answer.body.refundId,
      status: 'SUCCEEDED',
    });
    expect(answer.body.refundId).to.match(/^re_[0-9a-f]+$/);
    expect((await call('GET', `/refunds/${encodeURIComponent(req.refundNo)}`)).body).to.deep.equal(
      answer.body,
    );
    expect(await refundsOf(c)).to.deep.equal([answer.body]);
  });

  // The key sent: undefined sends the body's refundNo, null sends no Idempotency-Key at all.
  const malformed: [string, (c: Charge) => [Record<string, unknown>, string | null | undefined]][] = [
    ['no Idempotency-Key', (c) => [business(c), null]],
    ['an Idempotency-Key other than refundNo', (c) => [business(c), 'other']],
    [
      'no refundNo but an amount',
      (c) => [{ paymentNo: c.paymentNo, chargeId: c.chargeId, amount: '1.00' }, null],
    ],
    ['an empty refundNo', (c) => [business(c, { refundNo: '' }), '']],
    ['an amount of zero', (c) => [business(c, { amount: '0.00' }), undefined]],
    ['an amount as a number', (c) => [business(c, { amount: 1 }), undefined]],
    ['an amount with three decimals', (c) => [business(c, { amount: '1.005' }), undefined]],
    ['a lower-case currency', (c) => [business(c, { currency: 'usd' }), undefined]],
    ['no currency', (c) => [business(c, { currency: undefined }), undefined]],
    ['an unknown field', (c) => [business(c, { reason: 'x' }), undefined]],
  ];
  for (const [name, make] of malformed) {
    it(`when a refund has ${name}, then 400 with a JSON error and nothing is refunded`, async () => {
      const c = await charge();
      const [body, key] = make(c);
      const answer = await postRefund(body, key === undefined ? (body.refundNo as string) : key);
      expect(answer.status).to.equal(400);
      expect(answer.body.error).to.be.a('string');
      expect(await refundsOf(c)).to.deep.equal([]);
    });
  }

  it('when a refund body is not JSON, then 400', async () => {
    expect((await call('POST', '/refunds', '{"refundNo":', { 'idempotency-key': 'r' })).status).to.equal(400);
  });

  it('when no refund was made under a refundNo, then GET answers 404; other methods 405 with Allow', async () => {
    expect((await call('GET', `/refunds/ref_${randomUUID()}`)).status).to.equal(404);
    const wrong = await call('DELETE', '/refunds/x');
    expect(wrong.status).to.equal(405);
    expect(wrong.headers.get('allow')).to.equal('GET');
    expect((await call('GET', '/refunds/%E0%A4%A')).status).to.equal(400);
  });

  it('when the charge is declined, then a business refund of it is DECLINED (nothing is left of it)', async () => {
    const c = await charge({ declined: true });
    expect((await postRefund(business(c))).body.status).to.equal('DECLINED');
  });

  it('when a refund names a chargeId of another paymentNo, then 404 and nothing is recorded', async () => {
    const [a, b] = [await charge(), await charge()];
    expect((await postRefund(business(a, { chargeId: b.chargeId }))).status).to.equal(404);
    expect(
      (await ledger()).refunds.filter((r) => [a.chargeId, b.chargeId].includes(r.chargeId)),
    ).to.deep.equal([]);
  });

  it('when the compensation form is used under every fault, then it answers as before: one refund per charge, three fields', async () => {
    const c = await charge();
    await call('PUT', '/faults', { errorRate: 1, timeoutAfterChargeRate: 1, declineRate: 1 });
    const first = await call('POST', '/refunds', { paymentNo: c.paymentNo, chargeId: c.chargeId });
    const again = await call('POST', '/refunds', { paymentNo: c.paymentNo, chargeId: c.chargeId });
    expect(first.status).to.equal(200);
    expect(first.body).to.deep.equal({
      paymentNo: c.paymentNo,
      chargeId: c.chargeId,
      refundId: first.body.refundId,
    });
    expect(again.body).to.deep.equal(first.body);
    expect(await refundsOf(c)).to.deep.equal([first.body]);
  });

  it('when a charge was compensated, then a business refund of it is DECLINED', async () => {
    const c = await charge();
    await call('POST', '/refunds', { paymentNo: c.paymentNo, chargeId: c.chargeId });
    expect((await postRefund(business(c))).body.status).to.equal('DECLINED');
  });
});
