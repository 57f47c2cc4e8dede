import { expect } from 'chai';
import type { IdempotencyEngine } from '../../idempotency/engine.js';
import type { ResponseCipher } from '../../idempotency/response-cipher.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf, uniqueUsername } from '../support/users.js';
import { createOrderVia, ordersOf, recordsOf, sql } from './support.js';

/** The cipher of the running engine (private field: the test reads what the service really uses). */
async function engineCipher(): Promise<ResponseCipher> {
  const engine = (await sharedServer()).services.idempotency as IdempotencyEngine;
  return (engine as unknown as { cipher: ResponseCipher }).cipher;
}

describe('stored idempotency responses: encrypted, no secrets', () => {
  it('when a user with e-mail and password and an order are created with keys, then no stored body holds them in plaintext and each decrypts with the engine cipher', async () => {
    const tenant = uniqueTenant();
    const username = uniqueUsername('stored');
    const email = `${username}@example.com`;
    const password = 'Sup3r-Secret-Passw0rd';
    const name = 'Plaintext Person Name';
    const userRes = await http('POST', '/api/v1/users', {
      headers: { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() },
      body: { name, age: 41, username, email, password },
    });
    expect(userRes.status, userRes.text).to.equal(201);
    const userId = userRes.body.data.id as string;
    // A self-service PATCH (the user's own record) and a final failure (the e-mail already taken).
    const patch = await http('PATCH', `/api/v1/users/${userId}`, {
      headers: { ...bearer(tenant, userId), 'Idempotency-Key': idempotencyKey() },
      body: { name: `${name} Two` },
    });
    expect(patch.status, patch.text).to.equal(200);
    const clash = await http('POST', '/api/v1/users', {
      headers: { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() },
      body: { name, age: 1, email },
    });
    expect(clash.status).to.equal(409);
    const merchantOrderNo = 'MO-PLAINTEXT-4711';
    const orderRes = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, userId), 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo, amount: '12.34', description: 'plaintext description' },
    });
    expect(orderRes.status).to.equal(201);

    const records = await recordsOf(tenant);
    expect(records.map((r) => r.operation).sort()).to.deep.equal([
      'orders.create',
      'users.create',
      'users.create',
      'users.update',
    ]);
    const cipher = await engineCipher();
    const plaintextValues = [
      email,
      password,
      name,
      username,
      merchantOrderNo,
      'plaintext description',
      '12.34',
    ];
    for (const record of records) {
      expect(record.response_body, record.scope_key).to.be.a('string');
      const stored = record.response_body as string;
      for (const value of plaintextValues) {
        expect(stored, `${record.operation} stores ${value}`).to.not.include(value);
        expect(stored).to.not.include(Buffer.from(value).toString('base64'));
      }
      const plain = cipher.decrypt(stored, record.scope_key);
      const parsed = JSON.parse(plain) as { s: number; b: unknown };
      expect(parsed.s).to.equal(record.http_status);
      // Decrypted: transfer objects only, never the password or its hash and salt.
      expect(plain).to.not.include(password);
      expect(plain.toLowerCase()).to.not.match(/password|salt|hash/);
    }

    // biome-ignore lint/suspicious/noExplicitAny: the stored {s, h, b} form
    const storedOf = (op: string, status: number): any => {
      const record = records.find((r) => r.operation === op && r.http_status === status);
      expect(record, `${op} ${status}`).to.not.equal(undefined);
      return JSON.parse(cipher.decrypt(record?.response_body ?? '', record?.scope_key ?? ''));
    };
    const userStored = storedOf('users.create', 201);
    expect(userStored.b).to.deep.equal(userRes.body);
    expect(userStored.h).to.deep.equal({ Location: `/api/v1/users/${userId}` });
    expect(storedOf('users.update', 200).b).to.deep.equal(patch.body);
    expect(storedOf('orders.create', 201).b).to.deep.equal(orderRes.body);
    expect(storedOf('users.create', 409).b).to.deep.equal(clash.body);
  });

  it("when a stored body is moved onto another record, then the replay refuses it with 409 40903 (not 500), never answers with the other request's result and never executes again", async () => {
    const tenant = uniqueTenant();
    const user = '850000001';
    const [ka, kb] = [idempotencyKey(), idempotencyKey()];
    const a = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, user), 'Idempotency-Key': ka },
      body: { merchantOrderNo: 'mo-a', amount: 1 },
    });
    const b = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, user), 'Idempotency-Key': kb },
      body: { merchantOrderNo: 'mo-b', amount: 2 },
    });
    expect([a.status, b.status]).to.deep.equal([201, 201]);
    // Copy a's ciphertext onto b's record: the scope key is the AAD, so it cannot decrypt there.
    await sql(
      `UPDATE idempotency_records SET response_body = (SELECT response_body FROM idempotency_records WHERE scope_key = $1)
       WHERE scope_key = $2`,
      [`${tenant}:${user}:orders.create:${ka}`, `${tenant}:${user}:orders.create:${kb}`],
    );
    const replay = await createOrderVia({
      transport: 'rest',
      headers: { ...bearer(tenant, user), 'Idempotency-Key': kb },
      body: { merchantOrderNo: 'mo-b', amount: 2 },
    });
    expect(replay.status).to.equal(409);
    expect(replay.body.code).to.equal(40903);
    expect(replay.body.message).to.match(/cannot be read/);
    expect(JSON.stringify(replay.body)).to.not.include('mo-a');
    expect(replay.headers.get('idempotent-replayed')).to.equal(null);
    expect(await ordersOf(tenant)).to.have.length(2);
  });

  it('when the stored answer of a payment cannot be read, then the replay is rebuilt from the payment row: 201, the same payment, no second charge', async () => {
    const tenant = uniqueTenant();
    const user = '850000002';
    const auth = bearer(tenant, user);
    const order = await createOrderVia({
      transport: 'rest',
      headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
      body: { merchantOrderNo: 'mo-pay', amount: 3 },
    });
    expect(order.status).to.equal(201);
    const key = idempotencyKey();
    const body = { merchantOrderNo: 'mo-pay', amount: '3.00' };
    const first = await http('POST', '/api/v1/payments', {
      headers: { ...auth, 'Idempotency-Key': key },
      body,
    });
    expect(first.status, first.text).to.equal(201);
    await sql(`UPDATE idempotency_records SET response_body = 'v1:damaged' WHERE scope_key = $1`, [
      `${tenant}:${user}:payments.create:${key}`,
    ]);
    const replay = await http('POST', '/api/v1/payments', {
      headers: { ...auth, 'Idempotency-Key': key },
      body,
    });
    expect(replay.status, replay.text).to.equal(201);
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.headers.get('location')).to.equal(first.headers.get('location'));
    expect(replay.body).to.deep.equal(first.body);
    const payments = await sql('SELECT id FROM payments WHERE merchant_id = $1', [tenant]);
    expect(payments).to.have.length(1);
  });
});
