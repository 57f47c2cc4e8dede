import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { expect } from 'chai';
import createClient from 'openapi-fetch';
import type { paths } from '../../client/openapi-types.js';
import { renderOpenApiTypes } from '../../scripts/openapi-typegen.js';
import { recordedCalls } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { OPERATOR_ID, uniqueUsername } from '../support/users.js';

const OUTPUT_DIR = new URL('../../test-output/', import.meta.url);
const COMMITTED = new URL('../../client/openapi-types.ts', import.meta.url);

/**
 * An external client's fetch: every answer is also recorded for the run's OpenAPI conformance check
 * (the root hook test/setup/openapi-conformance.ts), like the answers of http().
 */
function recordingFetch(baseUrl: string) {
  return async (request: Request): Promise<Response> => {
    const res = await fetch(request);
    const text = await res.clone().text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    const url = new URL(request.url);
    recordedCalls.push({
      method: request.method,
      path: url.pathname + url.search,
      baseUrl,
      status: res.status,
      headers: Object.fromEntries(res.headers),
      body,
      text,
    });
    return res;
  };
}

describe('ops: a client generated from /openapi.json (openapi-typescript + openapi-fetch)', () => {
  let liveTypes: string;

  before(async () => {
    const res = await fetch(`${(await sharedServer()).url}/openapi.json`);
    expect(res.status).to.equal(200);
    liveTypes = await renderOpenApiTypes(await res.json());
    await mkdir(OUTPUT_DIR, { recursive: true });
    await writeFile(new URL('openapi-types.d.ts', OUTPUT_DIR), liveTypes);
  });

  it('when types are generated from the live document, then they equal the committed client/openapi-types.ts', async () => {
    expect(liveTypes).to.include('export interface paths');
    const committed = await readFile(COMMITTED, 'utf8');
    // On failure: the document changed; run `npx tsx scripts/generate-openapi-types.ts` and review the diff.
    expect(liveTypes === committed, 'client/openapi-types.ts is stale: regenerate it').to.equal(true);
  });

  it('when the typed client logs in, orders and pays, then replays and a changed amount behave as documented', async () => {
    const { url } = await sharedServer();
    const client = createClient<paths>({ baseUrl: url, fetch: recordingFetch(url) });
    const tenantId = uniqueTenant('gen');
    const username = uniqueUsername('gen');
    const password = 'correct horse battery';

    const createdUser = await client.POST('/api/v1/users', {
      headers: bearer(tenantId, OPERATOR_ID, 'admin'),
      body: { name: 'Generated Client', age: 41, username, email: `${username}@example.com`, password },
    });
    expect(createdUser.response.status, JSON.stringify(createdUser.error)).to.equal(201);
    const user = createdUser.data?.data;
    if (!user || !('id' in user)) throw new Error('no user in the 201 answer');
    expect(createdUser.response.headers.get('location')).to.equal(`/api/v1/users/${user.id}`);

    const login = await client.POST('/api/v1/tokens', { body: { tenantId, username, password } });
    expect(login.response.status, JSON.stringify(login.error)).to.equal(201);
    const token = login.data?.data;
    expect(token?.tokenType).to.equal('Bearer');
    const auth = { Authorization: `Bearer ${token?.token}` };

    const merchantOrderNo = `gen-${idempotencyKey()}`;
    const order = await client.POST('/api/v1/orders', {
      params: { header: { 'Idempotency-Key': idempotencyKey() } },
      headers: auth,
      body: { merchantOrderNo, amount: '12.30', currency: 'EUR' },
    });
    expect(order.response.status, JSON.stringify(order.error)).to.equal(201);
    const orderData = order.data?.data;
    if (!orderData || !('merchantOrderNo' in orderData)) throw new Error('no order in the 201 answer');
    expect(orderData).to.include({ merchantOrderNo, userId: user.id, amount: '12.30', status: 'CREATED' });

    const key = idempotencyKey();
    const payBody = { merchantOrderNo, amount: '12.30', currency: 'EUR' };
    const payment = await client.POST('/api/v1/payments', {
      params: { header: { 'Idempotency-Key': key } },
      headers: auth,
      body: payBody,
    });
    expect(payment.response.status, JSON.stringify(payment.error)).to.equal(201);
    const paid = payment.data?.data;
    if (!paid || !('paymentNo' in paid)) throw new Error('no payment in the 201 answer');
    expect(paid).to.include({ merchantId: tenantId, merchantOrderNo, amount: '12.30', status: 'SUCCEEDED' });
    expect(payment.response.headers.get('idempotent-replayed')).to.equal(null);

    const replay = await client.POST('/api/v1/payments', {
      params: { header: { 'Idempotency-Key': key } },
      headers: auth,
      body: payBody,
    });
    expect(replay.response.status).to.equal(201);
    expect(replay.response.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.data).to.deep.equal(payment.data);

    const changed = await client.POST('/api/v1/payments', {
      params: { header: { 'Idempotency-Key': key } },
      headers: auth,
      body: { ...payBody, amount: '99.99' },
    });
    expect(changed.response.status).to.equal(409);
    expect(changed.data).to.equal(undefined);
    expect(changed.error).to.deep.include({ code: 40901, data: { mismatch: ['/amount'] } });

    const order2 = await client.GET('/api/v1/orders/{id}', {
      params: { path: { id: orderData.id } },
      headers: auth,
    });
    expect(order2.data?.data.status).to.equal('PAID');
  });
});
