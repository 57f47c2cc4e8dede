// Issue 10, defect 7: the same request under one key was a 40901 (description null vs absent; a name
// in NFC vs NFD). Both failed before fp2.
import { expect } from 'chai';
import { fingerprintV1 } from '../../idempotency/fingerprint.js';
import { http } from '../support/http.js';
import { sharedServer, TEST_ENV } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf, createUser } from '../support/users.js';
import { sql, viaTrpc } from './support.js';

describe('fingerprint fp2 over HTTP: the same request is never a 40901', () => {
  it('when an order is retried with description null after it was sent without one (and back), then the retry replays', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, '880000001'), 'Idempotency-Key': idempotencyKey() };
    const first = await http('POST', '/api/v1/orders', {
      headers,
      body: { merchantOrderNo: 'mo-n', amount: 4 },
    });
    expect(first.status, first.text).to.equal(201);
    const nulled = await http('POST', '/api/v1/orders', {
      headers,
      body: { merchantOrderNo: 'mo-n', amount: '4.00', description: null },
    });
    expect(nulled.status, nulled.text).to.equal(201);
    expect(nulled.headers.get('idempotent-replayed')).to.equal('true');
    expect(nulled.body).to.deep.equal(first.body);
  });

  it('when a user is created with a name in NFC and retried in NFD, then the retry replays', async () => {
    const tenant = uniqueTenant();
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const first = await http('POST', '/api/v1/users', { headers, body: { name: 'Zo\u00eb', age: 30 } });
    expect(first.status, first.text).to.equal(201);
    const again = await http('POST', '/api/v1/users', { headers, body: { name: 'Zoe\u0308', age: 30 } });
    expect(again.status, again.text).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body).to.deep.equal(first.body);
  });

  it('when a record was written under fp1 (before the upgrade), then its retry still replays, and another body is still 40901', async () => {
    const tenant = uniqueTenant();
    const user = '880000002';
    const key = idempotencyKey();
    const headers = { ...bearer(tenant, user), 'Idempotency-Key': key };
    const body = { merchantOrderNo: 'mo-v1', amount: 6 };
    const first = await http('POST', '/api/v1/orders', { headers, body });
    expect(first.status).to.equal(201);
    // Rewrite the stored digest to what fp1 computed for this request.
    const v1 = fingerprintV1(TEST_ENV.IDEMPOTENCY_HMAC_KEY, {
      method: 'POST',
      path: '/api/v1/orders',
      route: '/api/v1/orders',
      mediaType: 'application/json',
      apiVersion: 'v1',
      tenantId: tenant,
      userId: user,
      body: { merchantOrderNo: 'mo-v1', amount: '6.00', currency: 'USD' },
      nonBusiness: ['traceId'],
    });
    const [updated] = await sql<{ n: number }>(
      `WITH u AS (UPDATE idempotency_records SET request_hash = $2 WHERE scope_key = $1 RETURNING 1)
       SELECT count(*)::int AS n FROM u`,
      [`${tenant}:${user}:orders.create:${key}`, v1],
    );
    expect(updated.n).to.equal(1);
    const again = await http('POST', '/api/v1/orders', { headers, body });
    expect(again.status, again.text).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const other = await http('POST', '/api/v1/orders', { headers, body: { ...body, amount: 7 } });
    expect(other.status).to.equal(409);
    expect(other.body.code).to.equal(40901);
  });
});

describe('409 40901 names the fields that differ (data.mismatch: JSON pointers)', () => {
  const first = { merchantOrderNo: 'mo-m', amount: '10.00', currency: 'USD' };

  it('when the same key comes with another amount and currency, then 409 40901 naming exactly /amount and /currency, on both transports', async () => {
    const tenant = uniqueTenant();
    const key = idempotencyKey();
    const headers = { ...bearer(tenant, '880000003'), 'Idempotency-Key': key };
    expect((await http('POST', '/api/v1/orders', { headers, body: first })).status).to.equal(201);
    const other = await http('POST', '/api/v1/orders', {
      headers,
      body: { ...first, amount: 11, currency: 'EUR' },
    });
    expect(other.status).to.equal(409);
    expect(other.body).to.deep.equal({
      code: 40901,
      message: 'Idempotency-Key was already used with a different request',
      data: { mismatch: ['/amount', '/currency'] },
    });
    const described = await http('POST', '/api/v1/orders', {
      headers,
      body: { ...first, description: 'new' },
    });
    expect(described.body.data).to.deep.equal({ mismatch: ['/description'] });
    const viaTrpc = await http('POST', '/trpc/orders.create', { headers, body: { ...first, amount: 12 } });
    expect(viaTrpc.status).to.equal(409);
    expect(viaTrpc.body.error.data.mismatch).to.deep.equal(['/amount']);
  });

  it('when the same key and body go to another user id (PATCH, then PUT status), then 409 40901 naming only /id, on both transports', async () => {
    const tenant = uniqueTenant();
    const [four, five] = [await createUser(tenant), await createUser(tenant)];
    const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const body = { name: 'Same', age: 5 };
    const first = await http('PATCH', `/api/v1/users/${four.id}`, { headers, body });
    expect(first.status, first.text).to.equal(200);
    const other = await http('PATCH', `/api/v1/users/${five.id}`, { headers, body });
    expect(other.status, other.text).to.equal(409);
    expect(other.body).to.deep.include({ code: 40901, data: { mismatch: ['/id'] } });
    const trpc = await viaTrpc((await sharedServer()).url, headers, (c) =>
      c.users.update.mutate({ id: five.id, ...body }),
    );
    expect(trpc.status).to.equal(409);
    expect(trpc.body.data).to.deep.equal({ mismatch: ['/id'] });

    const statusHeaders = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
    const disabled = { status: 'DISABLED' };
    const set = await http('PUT', `/api/v1/users/${four.id}/status`, {
      headers: statusHeaders,
      body: disabled,
    });
    expect(set.status, set.text).to.equal(200);
    const setOther = await http('PUT', `/api/v1/users/${five.id}/status`, {
      headers: statusHeaders,
      body: disabled,
    });
    expect(setOther.status, setOther.text).to.equal(409);
    expect(setOther.body.data).to.deep.equal({ mismatch: ['/id'] });
  });

  it('when only a non-business field differs (traceId) or the amount is spelled otherwise, then it is a replay, not a 409', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, '880000004'), 'Idempotency-Key': idempotencyKey() };
    const created = await http('POST', '/api/v1/orders', { headers, body: { ...first, traceId: 't-1' } });
    expect(created.status).to.equal(201);
    const again = await http('POST', '/api/v1/orders', {
      headers,
      body: { ...first, amount: 10, traceId: 't-2' },
    });
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
  });

  it('when the stored request is an old record without field digests, then the 409 names no field', async () => {
    const tenant = uniqueTenant();
    const user = '880000005';
    const key = idempotencyKey();
    const headers = { ...bearer(tenant, user), 'Idempotency-Key': key };
    expect((await http('POST', '/api/v1/orders', { headers, body: first })).status).to.equal(201);
    await sql('UPDATE idempotency_records SET field_hashes = NULL WHERE scope_key = $1', [
      `${tenant}:${user}:orders.create:${key}`,
    ]);
    const other = await http('POST', '/api/v1/orders', { headers, body: { ...first, amount: 11 } });
    expect(other.status).to.equal(409);
    expect(other.body.data).to.equal(null);
  });

  it('when the body is stored, then no field value appears in the record in plaintext', async () => {
    const tenant = uniqueTenant();
    const user = '880000006';
    const key = idempotencyKey();
    const headers = { ...bearer(tenant, user), 'Idempotency-Key': key };
    await http('POST', '/api/v1/orders', { headers, body: { ...first, description: 'secret-words-here' } });
    const [row] = await sql<{ field_hashes: string }>(
      'SELECT field_hashes FROM idempotency_records WHERE scope_key = $1',
      [`${tenant}:${user}:orders.create:${key}`],
    );
    expect(Object.keys(JSON.parse(row.field_hashes)).sort()).to.deep.equal([
      'amount',
      'currency',
      'description',
      'merchantOrderNo',
    ]);
    expect(row.field_hashes).to.not.include('secret-words-here');
    expect(row.field_hashes).to.not.include('mo-m');
  });
});
