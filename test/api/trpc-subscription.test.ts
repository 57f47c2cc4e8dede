// events.onEvent over SSE (GET /trpc/events.onEvent?input=<JSON>): a request that fails before its
// first event (authentication, input) is a plain tRPC HTTP error with the REST status (CONTRACT
// sections 1 and 4), not a 200 stream carrying the error; an authorised one still streams.
import { TRPCClientError } from '@trpc/client';
import { expect } from 'chai';
import { createServiceClient } from '../../client/index.js';
import type { HttpResult } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { sharedServer } from '../support/server.js';
import { bearer, rawToken, uniqueTenant } from '../support/tokens.js';

const PATH = '/trpc/events.onEvent';
const query = (input: string) => `${PATH}?input=${encodeURIComponent(input)}`;
const sse = { accept: 'text/event-stream' };

/** The answer is tRPC's error body with the given status and business code, and no stream. */
function expectTrpcError(res: HttpResult, status: number, label: string) {
  expect(res.status, `${label}: ${res.text}`).to.equal(status);
  expect(res.headers.get('content-type'), label).to.match(/^application\/json/);
  expect(res.body, label).to.have.all.keys('error');
  expect(res.body.error.data, label).to.deep.include({
    httpStatus: status,
    businessCode: status,
    path: 'events.onEvent',
  });
}

/**
 * One GET of the subscription: a JSON answer read whole; a stream (the answer before the fix) is
 * cancelled at once instead of read, so the test fails on its status rather than hanging.
 */
async function get(path: string, headers: Record<string, string>): Promise<HttpResult> {
  const res = await fetch(`${(await sharedServer()).url}${path}`, { headers });
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status, headers: res.headers, body: undefined, text: '(a stream)' };
  }
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: JSON.parse(text), text };
}

/** Reads an SSE body until `done` says so; the stream is then cancelled. */
async function readUntil(body: ReadableStream<Uint8Array>, done: (text: string) => boolean): Promise<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    while (!done(text)) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
    }
  } finally {
    await reader.cancel();
  }
  return text;
}

describe('tRPC transport: events.onEvent refused before its stream', () => {
  it('when the token is missing, malformed or wrongly signed, then 401 with WWW-Authenticate: Bearer in tRPC error format, and no stream', async () => {
    const wrongSecret = rawToken({ sub: '1', tid: 't1', role: 'admin' }, 'another-secret-0123456789abcdef', {
      expiresIn: 3600,
    });
    const cases: Array<[string, Record<string, string>]> = [
      ['no token', sse],
      ['a malformed token', { ...sse, Authorization: 'Bearer abc.def.ghi' }],
      ['a wrongly signed token', { ...sse, Authorization: `Bearer ${wrongSecret}` }],
    ];
    for (const [label, headers] of cases) {
      const res = await get(query('{}'), headers);
      expectTrpcError(res, 401, label);
      expect(res.headers.get('www-authenticate'), label).to.equal('Bearer');
      expect(res.body.error.data.code, label).to.equal('UNAUTHORIZED');
    }
    // Authentication comes first: a bad input without a token is still a 401.
    expectTrpcError(await get(query('{"types":["bogus"]}'), sse), 401, 'both');
  });

  it('when the input is refused by its schema or is not JSON, then 400 in tRPC error format, and no stream', async () => {
    const auth = { ...sse, ...bearer(uniqueTenant('sub-gate'), '840000051', 'admin') };
    const cases: Array<[string, string, Record<string, string>]> = [
      ['an unknown event type', query('{"types":["bogus"]}'), auth],
      ['a lastEventId that is no cursor', query('{"lastEventId":"garbage"}'), auth],
      ['input that is not JSON', `${PATH}?input=garbage`, auth],
      ['a Last-Event-ID header that is no cursor', query('{}'), { ...auth, 'Last-Event-ID': 'garbage' }],
      ['a key the input does not have', query('{"nick":"x"}'), auth],
    ];
    for (const [label, path, headers] of cases) {
      const res = await get(path, headers);
      expectTrpcError(res, 400, label);
      expect(res.body.error.data.code, label).to.equal('BAD_REQUEST');
    }
    const res = await get(query('{"lastEventId":"garbage"}'), auth);
    expect(res.body.error.message).to.match(/^lastEventId: /);
  });

  it('when a subscription path is asked with another method than GET, then 405 with Allow: GET in tRPC error format, and no stream', async () => {
    const auth = bearer(uniqueTenant('sub-gate'), '840000053', 'admin');
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await fetch(`${(await sharedServer()).url}${PATH}`, {
        method,
        headers: { ...auth, 'content-type': 'application/json' },
        body: '{}',
      });
      const text = await res.text();
      const answer: HttpResult = { status: res.status, headers: res.headers, body: JSON.parse(text), text };
      expectTrpcError(answer, 405, method);
      expect(res.headers.get('allow'), method).to.equal('GET');
      expect(answer.body.error.data.code, method).to.equal('METHOD_NOT_SUPPORTED');
    }
  });

  it('when an authorised subscriber resumes from a cursor, then it streams the events after it', async () => {
    const tenant = uniqueTenant('sub-gate');
    const admin = bearer(tenant, '840000052', 'admin');
    const order = await createOrder(undefined, admin, 'gate-1');
    const base = (await sharedServer()).url;
    const ac = new AbortController();
    const res = await fetch(`${base}${query('{"lastEventId":"evt_0_0"}')}`, {
      headers: { ...sse, ...admin },
      signal: ac.signal,
    });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/event-stream/);
    // Until the order's event, by a string only it holds: its id alone (e.g. "300") may be a part of
    // the `connected` message (`"reconnectAfterInactivityMs":30000`), which ended the read too soon.
    const text = await readUntil(res.body as ReadableStream<Uint8Array>, (t) =>
      t.includes(`"merchantOrderNo":"gate-1"`),
    );
    ac.abort();
    expect(text).to.match(/event: connected/);
    expect(text).to.not.match(/serialized-error/);
    expect(text).to.include(`"id":"${order.id}"`);
  });

  it("when @trpc/client's httpSubscriptionLink gets the 401, then the subscription fails at once with the status, without retrying", async () => {
    let requests = 0;
    const counting: typeof fetch = (input, init) => {
      requests += 1;
      return fetch(input, init);
    };
    const { trpc } = createServiceClient({
      url: (await sharedServer()).url,
      token: 'abc.def.ghi',
      fetch: counting,
    });
    const states: string[] = [];
    const error = await new Promise<unknown>((resolve) => {
      trpc.events.onEvent.subscribe(
        {},
        {
          onData: () => resolve(new Error('an event arrived')),
          onError: resolve,
          onConnectionStateChange: (s) => states.push(s.state),
        },
      );
    });
    expect(error).to.be.instanceOf(TRPCClientError);
    // The link's EventSource fails the connection on a non-200 answer (it does not read the body):
    // the error carries the status in its message, and no second request is made.
    expect((error as TRPCClientError<never>).message).to.equal('Non-200 status code (401)');
    expect(states).to.not.include('pending');
    expect(requests).to.equal(1);
  });
});
