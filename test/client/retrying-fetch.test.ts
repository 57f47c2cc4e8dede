// The client's retry rules (client/retrying-fetch.ts) against a scripted fetch: which answers are
// retried, with which key, how long it waits, and how a call ends at its deadline or on abort. The
// real-process behaviour (SIGKILL behind nginx, gateway outage, slow gateway) is clients.test.ts.
import { expect } from 'chai';
import {
  nextDelayMs,
  RetriesExhaustedError,
  retryAfterMs,
  retryingFetch,
  StillProcessingError,
} from '../../client/retrying-fetch.js';

interface Sent {
  key: string | null;
  at: number;
}

/** A fetch that answers from a script (one entry per attempt; the last one repeats). */
function scripted(answers: Array<() => Response | Promise<Response>>) {
  const sent: Sent[] = [];
  const t0 = Date.now();
  const fetchLike = (async (_url: string | URL | Request, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    sent.push({ key: headers.get('idempotency-key'), at: Date.now() - t0 });
    const next = answers[Math.min(sent.length - 1, answers.length - 1)];
    return next();
  }) as typeof fetch;
  return { sent, fetchLike };
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  () =>
    new Response(JSON.stringify(body), {
      status,
      headers: { 'content-type': 'application/json', ...headers },
    });
const refused = () => {
  throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
};
const post = (init: RequestInit = {}) =>
  new Request('http://127.0.0.1:1/api/v1/payments', { method: 'POST', body: '{"a":1}', ...init });
const fast = { baseDelayMs: 5, maxDelayMs: 20 };

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('the call did not fail');
}

describe('client: retryingFetch rules', () => {
  it('when the service answers 503, 429, a proxy 502/504 and a refused connection before 201, then every attempt carries one key made for the call', async () => {
    const { sent, fetchLike } = scripted([
      json(503, { code: 503 }, { 'retry-after': '0' }),
      json(429, { code: 42901 }),
      json(502, {}),
      refused,
      json(504, {}),
      json(201, { code: 200, data: { id: 'p1' } }),
    ]);
    const res = await retryingFetch(fast, fetchLike)(post());
    expect(res.status).to.equal(201);
    expect(sent).to.have.length(6);
    expect(new Set(sent.map((s) => s.key)).size).to.equal(1);
    expect(sent[0].key).to.match(/^[0-9a-f-]{36}$/);
  });

  it('when the caller set a key, then that key is sent on every attempt and no other is made', async () => {
    const { sent, fetchLike } = scripted([json(503, { code: 503 }), json(201, { code: 200 })]);
    const request = post({ headers: { 'Idempotency-Key': 'message-0000000042' } });
    await retryingFetch(fast, fetchLike)(request);
    expect(sent.map((s) => s.key)).to.deep.equal(['message-0000000042', 'message-0000000042']);
  });

  for (const status of [400, 401, 403, 404, 409, 413, 500]) {
    it(`when the service answers ${status}, then it is final: one attempt, returned as it came`, async () => {
      const { sent, fetchLike } = scripted([json(status, { code: status }), json(201, {})]);
      const res = await retryingFetch(fast, fetchLike)(post());
      expect(res.status).to.equal(status);
      expect(sent).to.have.length(1);
    });
  }

  it('when a GET is sent, then no key is made for it', async () => {
    const { sent, fetchLike } = scripted([json(200, {})]);
    await retryingFetch(fast, fetchLike)(new Request('http://127.0.0.1:1/api/v1/payments/p1'));
    expect(sent[0].key).to.equal(null);
  });

  it('when the service keeps answering 503 with Retry-After: 1 past the deadline, then a wait that would pass it is cut short for one last attempt, and the call ends RetriesExhausted with the last status and code', async () => {
    const { sent, fetchLike } = scripted([json(503, { code: 503 }, { 'retry-after': '1' })]);
    const err = await rejection(retryingFetch({ ...fast, deadlineMs: 1500 }, fetchLike)(post()));
    expect(err).to.be.instanceOf(RetriesExhaustedError);
    const exhausted = err as RetriesExhaustedError;
    expect(exhausted.lastStatus).to.equal(503);
    expect(exhausted.lastCode).to.equal(503);
    expect(exhausted.idempotencyKey).to.equal(sent[0].key);
    // The advised second (1 s) did not fit before the deadline (1.5 s less 1 s kept for the last
    // attempt): the second attempt came after a shortened wait, and there was no third.
    expect(sent).to.have.length(2);
  });

  it('when a 202 is followed by 503s until the deadline, then the call ends StillProcessing with the key and the Location of the 202', async () => {
    const { sent, fetchLike } = scripted([
      json(
        202,
        { code: 202, data: { status: 'PROCESSING', resourceId: 'p9' } },
        { location: '/api/v1/payments/p9', 'retry-after': '1' },
      ),
      json(503, { code: 503 }, { 'retry-after': '1' }),
    ]);
    const err = await rejection(retryingFetch({ ...fast, deadlineMs: 1500 }, fetchLike)(post()));
    expect(err).to.be.instanceOf(StillProcessingError);
    expect((err as StillProcessingError).idempotencyKey).to.equal(sent[0].key);
    expect((err as StillProcessingError).location).to.equal('/api/v1/payments/p9');
  });

  it('when a 202 comes first, then the call is sent again with the same key until the final answer', async () => {
    const { sent, fetchLike } = scripted([
      json(202, { code: 202, data: { status: 'PROCESSING', resourceId: 'p9' } }, { 'retry-after': '0' }),
      json(202, { code: 202, data: { status: 'PROCESSING', resourceId: 'p9' } }),
      json(201, { code: 200, data: { id: 'p9' } }),
    ]);
    const res = await retryingFetch(fast, fetchLike)(post());
    expect(res.status).to.equal(201);
    expect(sent).to.have.length(3);
    expect(new Set(sent.map((s) => s.key)).size).to.equal(1);
  });

  it("when a tRPC result carries the processing marker, then it is followed like a 202 (told apart by the request's path)", async () => {
    const marker = { result: { data: { code: 202, data: { status: 'PROCESSING', resourceId: null } } } };
    const { sent, fetchLike } = scripted([json(200, marker), json(200, { result: { data: { code: 200 } } })]);
    const res = await retryingFetch(
      fast,
      fetchLike,
    )(new Request('http://127.0.0.1:1/trpc/payments.create', { method: 'POST', body: '{}' }));
    expect(res.status).to.equal(200);
    expect(sent).to.have.length(2);
  });

  it('when the caller aborts during a wait, then the call ends at once with the reason and sends nothing more', async () => {
    const { sent, fetchLike } = scripted([json(503, { code: 503 }, { 'retry-after': '30' })]);
    const controller = new AbortController();
    const call = retryingFetch({ deadlineMs: 60000 }, fetchLike)(post({ signal: controller.signal }));
    setTimeout(() => controller.abort(new Error('caller gave up')), 50);
    const err = await rejection(call);
    expect((err as Error).message).to.equal('caller gave up');
    expect(sent).to.have.length(1);
  });

  it('reads Retry-After as delta-seconds or an HTTP-date, and ignores anything else', () => {
    const now = Date.parse('2026-11-24T12:00:00Z');
    expect(retryAfterMs('3', now)).to.equal(3000);
    expect(retryAfterMs(' 0 ', now)).to.equal(0);
    expect(retryAfterMs('Tue, 24 Nov 2026 12:00:05 GMT', now)).to.equal(5000);
    expect(retryAfterMs('Tue, 24 Nov 2026 11:00:00 GMT', now)).to.equal(0);
    expect(retryAfterMs('soon', now)).to.equal(undefined);
    expect(retryAfterMs('-1', now)).to.equal(undefined);
    expect(retryAfterMs(null, now)).to.equal(undefined);
  });

  it('waits never sooner than told, at most a fifth later, at least the base delay; back-off doubles up to its cap', () => {
    const opts = { baseDelayMs: 100, maxDelayMs: 1000 };
    expect(nextDelayMs(0, 2000, opts, () => 0)).to.equal(2000);
    expect(nextDelayMs(0, 2000, opts, () => 0.999)).to.be.within(2000, 2400);
    expect(nextDelayMs(0, 0, opts, () => 0)).to.equal(100);
    expect(nextDelayMs(0, undefined, opts, () => 1)).to.equal(100);
    expect(nextDelayMs(3, undefined, opts, () => 1)).to.equal(800);
    expect(nextDelayMs(10, undefined, opts, () => 1)).to.equal(1000);
    expect(nextDelayMs(10, undefined, opts, () => 0)).to.equal(500);
  });
});
