// Payments and refunds read the caller's user row in their claim's round trip (routers/user-gate.ts,
// idempotency/effect.ts Gate), not in a round trip of their own before it. These tests hold them to
// the answers of the read first: a DISABLED user refused before anything the claim found (a new key,
// a replay, a cap, a tombstone), nothing kept, nothing charged; the row's role winning over the
// token's; 403 before 400; and no read before the claim.
import { expect } from 'chai';
import { scopeKey } from '../../idempotency/key.js';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import { sql } from '../idempotency/support.js';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { queriesDuring } from '../support/queries.js';
import { paidPayment, refund } from '../support/refunds.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation } from '../support/trpc-http.js';
import { createUser, expectError } from '../support/users.js';

const setStatus = (id: string, status: 'ACTIVE' | 'DISABLED') =>
  sql('UPDATE users SET status = $2 WHERE id = $1', [id, status]);
const setRole = (id: string, role: 'admin' | 'user') =>
  sql('UPDATE users SET role = $2 WHERE id = $1', [id, role]);

const countOf = async (text: string, bind: unknown[]) => Number((await sql<{ n: string }>(text, bind))[0].n);
const paymentsOf = (tenant: string) =>
  countOf('SELECT count(*) AS n FROM payments WHERE merchant_id = $1', [tenant]);
const recordsOf = (tenant: string) =>
  countOf(`SELECT count(*) AS n FROM idempotency_records WHERE split_part(user_scope, ':', 1) = $1`, [
    tenant,
  ]);

const pay = (headers: Record<string, string>, key: string, body: Record<string, unknown>) =>
  http('POST', '/api/v1/payments', { headers: { ...headers, 'Idempotency-Key': key }, body });

/** An active user with an order of 25.00 (merchantOrderNo `mo`), and the user's token. */
async function userWithOrder(tenant: string, role: 'admin' | 'user' = 'user') {
  const user = await createUser(tenant, { role });
  const auth = bearer(tenant, user.id, role);
  await createOrder(undefined, auth, 'mo');
  return { user, auth };
}

describe('payments and refunds: the user row read in the claim round trip', () => {
  it('when an active user pays, then the user row rides at the end of the claim round trip: no read before it', async () => {
    const tenant = uniqueTenant('gate');
    const { auth } = await userWithOrder(tenant);
    let status = 0;
    const texts = await queriesDuring(async () => {
      status = (await pay(auth, idempotencyKey(), { merchantOrderNo: 'mo', amount: '25.00' })).status;
    });
    expect(status).to.equal(201);
    const claim = texts.findIndex((t) => t.includes('idem_claim('));
    expect(claim, texts.join('\n')).to.be.at.least(0);
    expect(texts[claim]).to.include('idem_auth_read(');
    expect(
      texts.slice(0, claim).filter((t) => t.includes('idem_auth_read')),
      texts.join('\n'),
    ).to.deep.equal([]);
  });

  it('when the user is DISABLED, then a new key is 403 on REST and tRPC: no record, no payment, the order unpaid', async () => {
    const tenant = uniqueTenant('gate');
    const { user, auth } = await userWithOrder(tenant);
    await setStatus(user.id, 'DISABLED');
    const rest = await pay(auth, idempotencyKey(), { merchantOrderNo: 'mo', amount: '25.00' });
    expectError(rest, 403);
    expect(rest.body.message).to.equal('User is disabled');
    const trpc = await trpcMutation(
      'payments.create',
      { merchantOrderNo: 'mo', amount: '25.00' },
      {
        ...auth,
        'Idempotency-Key': idempotencyKey(),
      },
    );
    expect(trpc.status).to.equal(403);
    expect(await paymentsOf(tenant)).to.equal(0);
    // The order's own record (its create) is the tenant's only one.
    expect(await recordsOf(tenant)).to.equal(1);
    await setStatus(user.id, 'ACTIVE');
    expect((await pay(auth, idempotencyKey(), { merchantOrderNo: 'mo', amount: '25.00' })).status).to.equal(
      201,
    );
  });

  it('when a user disabled since replays a paid key or sends an invalid body, then 403 (before the replay, before 400)', async () => {
    const tenant = uniqueTenant('gate');
    const { user, auth } = await userWithOrder(tenant);
    const key = idempotencyKey();
    const first = await pay(auth, key, { merchantOrderNo: 'mo', amount: '25.00' });
    expect(first.status).to.equal(201);
    await setStatus(user.id, 'DISABLED');
    expectError(await pay(auth, key, { merchantOrderNo: 'mo', amount: '25.00' }), 403);
    expectError(await pay(auth, key, { merchantOrderNo: 'mo', amount: 'not money' }), 403);
    expectError(await pay(auth, idempotencyKey(), { amount: '25.00' }), 403);
    // Without a key (400 for an active user) too.
    expectError(
      await http('POST', '/api/v1/payments', { headers: auth, body: { merchantOrderNo: 'mo' } }),
      403,
    );
    await setStatus(user.id, 'ACTIVE');
    const again = await pay(auth, key, { merchantOrderNo: 'mo', amount: '25.00' });
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body).to.deep.equal(first.body);
  });

  it('when a purged key is sent again by a user disabled since, then 403; by an active user, 409 40905', async () => {
    const tenant = uniqueTenant('gate');
    const { user, auth } = await userWithOrder(tenant);
    const key = idempotencyKey();
    expect((await pay(auth, key, { merchantOrderNo: 'mo', amount: '25.00' })).status).to.equal(201);
    await sql(
      `UPDATE idempotency_records SET expires_at = now() - interval '1 minute' WHERE scope_key = $1`,
      [scopeKey(tenant, user.id, 'payments.create', key)],
    );
    await purgeExpired((await sharedServer()).services.sequelize);
    await setStatus(user.id, 'DISABLED');
    expectError(await pay(auth, key, { merchantOrderNo: 'mo', amount: '25.00' }), 403);
    await setStatus(user.id, 'ACTIVE');
    expectError(await pay(auth, key, { merchantOrderNo: 'mo', amount: '25.00' }), 409, 40905);
  });

  it("when the row's role differs from the token's, then the row's decides whose order may be paid", async () => {
    const tenant = uniqueTenant('gate');
    const owner = await userWithOrder(tenant);
    // A token that says admin for a row demoted to user: another user's order is not theirs (403).
    const demoted = await createUser(tenant, { role: 'admin' });
    await setRole(demoted.id, 'user');
    const refused = await pay(bearer(tenant, demoted.id, 'admin'), idempotencyKey(), {
      merchantOrderNo: 'mo',
      amount: '25.00',
    });
    expectError(refused, 403);
    expect(refused.body.message).to.equal('Not your order');
    // A token that says user for a row promoted to admin: an admin pays anyone's order.
    const promoted = await createUser(tenant, { role: 'user' });
    await setRole(promoted.id, 'admin');
    const paid = await pay(bearer(tenant, promoted.id, 'user'), idempotencyKey(), {
      merchantOrderNo: 'mo',
      amount: '25.00',
    });
    expect(paid.status, paid.text).to.equal(201);
    const ownersPayments = await countOf(
      'SELECT count(*) AS n FROM payments WHERE merchant_id = $1 AND user_id = $2',
      [tenant, owner.user.id],
    );
    expect(ownersPayments).to.equal(1);
  });

  it('when the user is DISABLED, then a refund is 403 and nothing is refunded', async () => {
    const tenant = uniqueTenant('gate');
    const user = await createUser(tenant);
    const auth = bearer(tenant, user.id);
    const payment = await paidPayment(undefined, auth, '30.00');
    await setStatus(user.id, 'DISABLED');
    const res = await refund(undefined, auth, payment.id, idempotencyKey(), { amount: '5.00' });
    expectError(res, 403);
    expect(res.body.message).to.equal('User is disabled');
    expect(await countOf('SELECT count(*) AS n FROM refunds WHERE payment_id = $1', [payment.id])).to.equal(
      0,
    );
    await setStatus(user.id, 'ACTIVE');
    expect((await refund(undefined, auth, payment.id, idempotencyKey(), { amount: '5.00' })).status).to.equal(
      201,
    );
  });
});
