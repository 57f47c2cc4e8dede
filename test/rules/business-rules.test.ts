// The business rules, called through tRPC's createCaller against the real database (no HTTP): the
// procedures, their validation, roles, idempotency and the domain rules, exactly as both transports
// run them. The HTTP suites (test/api, test/idempotency, ...) check the contract on the wire.
import { TRPCError } from '@trpc/server';
import { expect } from 'chai';
import { callerFor } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf, uniqueUsername } from '../support/users.js';

/** The TRPCError a call fails with, and the business code the error table gives it. */
async function failure(call: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await call;
  } catch (err) {
    expect(err).to.be.instanceOf(TRPCError);
    return { code: (err as TRPCError).code, message: (err as TRPCError).message };
  }
  throw new Error('the call succeeded');
}

const withKey = (headers: Record<string, string>, key = idempotencyKey()) => ({
  ...headers,
  'Idempotency-Key': key,
});

describe('business rules through createCaller (real database, no HTTP)', () => {
  describe('users', () => {
    it('when an admin creates a user without role or status, then the user is an ACTIVE user; a second user with the same email is a CONFLICT', async () => {
      const tenant = uniqueTenant('rules');
      const { caller } = await callerFor(adminOf(tenant));
      const email = `${uniqueUsername('r')}@example.com`;
      const created = (await caller.users.create({ name: 'Ann', age: 31, email })) as {
        data: { role: string; status: string };
      };
      expect(created.data).to.include({ role: 'user', status: 'ACTIVE' });
      const clash = await failure(caller.users.create({ name: 'Bob', age: 40, email }));
      expect(clash.code).to.equal('CONFLICT');
    });

    it('when a user (not an admin) creates a user, then FORBIDDEN; an invalid age is BAD_REQUEST before the role is checked', async () => {
      const tenant = uniqueTenant('rules');
      const { caller } = await callerFor(bearer(tenant, '950000001'));
      expect((await failure(caller.users.create({ name: 'X', age: 3 }))).code).to.equal('FORBIDDEN');
      expect((await failure(caller.users.create({ name: 'X', age: 151 }))).code).to.equal('BAD_REQUEST');
    });

    it('when a user is DISABLED, then their own token is FORBIDDEN at once', async () => {
      const tenant = uniqueTenant('rules');
      const { caller: admin } = await callerFor(adminOf(tenant));
      const user = (await admin.users.create({ name: 'Dee', age: 22 })) as { data: { id: string } };
      const { caller: self } = await callerFor(bearer(tenant, user.data.id));
      expect(((await self.users.get({ id: user.data.id })) as { data: { id: string } }).data.id).to.equal(
        user.data.id,
      );
      await admin.users.setStatus({ id: user.data.id, status: 'DISABLED' });
      expect((await failure(self.users.get({ id: user.data.id }))).code).to.equal('FORBIDDEN');
    });

    it('when a user patches themselves, then the fields sent change and the others stay; a role in the PATCH is BAD_REQUEST', async () => {
      const tenant = uniqueTenant('rules');
      const { caller: admin } = await callerFor(adminOf(tenant));
      const user = (await admin.users.create({ name: 'Eve', age: 50 })) as { data: { id: string } };
      const { caller: self } = await callerFor(bearer(tenant, user.data.id));
      const patched = (await self.users.update({ id: user.data.id, name: 'Eva' })) as {
        data: { name: string; age: number };
      };
      expect(patched.data).to.include({ name: 'Eva', age: 50 });
      // biome-ignore lint/suspicious/noExplicitAny: the call is invalid on purpose
      const withRole = await failure(self.users.update({ id: user.data.id, role: 'admin' } as any));
      expect(withRole.code).to.equal('BAD_REQUEST');
    });

    it("when a user reads another user of the tenant, then FORBIDDEN; another tenant's user is NOT_FOUND", async () => {
      const tenant = uniqueTenant('rules');
      const { caller: admin } = await callerFor(adminOf(tenant));
      const other = (await admin.users.create({ name: 'Fay', age: 20 })) as { data: { id: string } };
      const { caller: user } = await callerFor(bearer(tenant, '950000002'));
      expect((await failure(user.users.get({ id: other.data.id }))).code).to.equal('FORBIDDEN');
      const { caller: stranger } = await callerFor(adminOf(uniqueTenant('rules')));
      expect((await failure(stranger.users.get({ id: other.data.id }))).code).to.equal('NOT_FOUND');
    });

    it('when a user is deleted with a key and the delete is repeated with it, then the same answer; without a key a second delete is NOT_FOUND', async () => {
      const tenant = uniqueTenant('rules');
      const key = idempotencyKey();
      const { caller: admin } = await callerFor(adminOf(tenant));
      const user = (await admin.users.create({ name: 'Gus', age: 60 })) as { data: { id: string } };
      const { caller: keyed } = await callerFor(withKey(adminOf(tenant), key));
      await keyed.users.delete({ id: user.data.id });
      await keyed.users.delete({ id: user.data.id });
      expect((await failure(admin.users.delete({ id: user.data.id }))).code).to.equal('NOT_FOUND');
    });
  });

  describe('orders', () => {
    it('when an order is created with amount 10 and no currency, then "10.00" USD CREATED of its creator; without a key BAD_REQUEST', async () => {
      const tenant = uniqueTenant('rules');
      const auth = bearer(tenant, '950000010');
      const { caller } = await callerFor(withKey(auth));
      const order = (await caller.orders.create({ merchantOrderNo: 'r-1', amount: 10 })) as {
        data: { amount: string; currency: string; status: string; userId: string };
      };
      expect(order.data).to.include({
        amount: '10.00',
        currency: 'USD',
        status: 'CREATED',
        userId: '950000010',
      });
      const { caller: keyless } = await callerFor(auth);
      expect((await failure(keyless.orders.create({ merchantOrderNo: 'r-2', amount: 1 }))).code).to.equal(
        'BAD_REQUEST',
      );
    });

    it('when the same key comes with the same order, then the first result; with another body, CONFLICT; another key with the same merchantOrderNo, CONFLICT', async () => {
      const tenant = uniqueTenant('rules');
      const auth = bearer(tenant, '950000011');
      const key = idempotencyKey();
      const { caller } = await callerFor(withKey(auth, key));
      const first = await caller.orders.create({ merchantOrderNo: 'r-3', amount: '5.5' });
      expect(await caller.orders.create({ merchantOrderNo: 'r-3', amount: 5.5 })).to.deep.equal(first);
      expect((await failure(caller.orders.create({ merchantOrderNo: 'r-3', amount: 6 }))).code).to.equal(
        'CONFLICT',
      );
      const { caller: other } = await callerFor(withKey(auth));
      expect((await failure(other.orders.create({ merchantOrderNo: 'r-3', amount: 5.5 }))).code).to.equal(
        'CONFLICT',
      );
    });

    it("when a user lists orders, then only their own; an admin sees the tenant's; another user's order is FORBIDDEN", async () => {
      const tenant = uniqueTenant('rules');
      const mine = bearer(tenant, '950000012');
      const theirs = bearer(tenant, '950000013');
      const { caller: me } = await callerFor(withKey(mine));
      const { caller: them } = await callerFor(withKey(theirs));
      await me.orders.create({ merchantOrderNo: 'm-1', amount: 1 });
      const other = (await them.orders.create({ merchantOrderNo: 't-1', amount: 2 })) as {
        data: { id: string };
      };
      const listed = (await me.orders.list({ page: 1, size: 10 })) as {
        data: Array<{ merchantOrderNo: string }>;
      };
      expect(listed.data.map((o) => o.merchantOrderNo)).to.deep.equal(['m-1']);
      const { caller: admin } = await callerFor(adminOf(tenant));
      const all = (await admin.orders.list({ page: 1, size: 10 })) as { data: unknown[] };
      expect(all.data).to.have.length(2);
      expect((await failure(me.orders.get({ id: other.data.id }))).code).to.equal('FORBIDDEN');
    });
  });

  describe('payments', () => {
    it('when an order is paid, then SUCCEEDED and the order PAID; any later key gets the same payment; another amount is CONFLICT', async () => {
      const tenant = uniqueTenant('rules');
      const auth = bearer(tenant, '950000020');
      const { caller: ordering } = await callerFor(withKey(auth));
      await ordering.orders.create({ merchantOrderNo: 'p-1', amount: '12.00' });
      const { caller } = await callerFor(withKey(auth));
      const paid = (await caller.payments.create({ merchantOrderNo: 'p-1', amount: 12 })) as {
        data: { id: string; status: string };
      };
      expect(paid.data.status).to.equal('SUCCEEDED');
      const order = (await ordering.orders.list({ page: 1, size: 1 })) as { data: Array<{ status: string }> };
      expect(order.data[0].status).to.equal('PAID');
      const { caller: again } = await callerFor(withKey(auth));
      expect(await again.payments.create({ merchantOrderNo: 'p-1', amount: '12.00' })).to.deep.equal(paid);
      const { caller: other } = await callerFor(withKey(auth));
      expect((await failure(other.payments.create({ merchantOrderNo: 'p-1', amount: 13 }))).code).to.equal(
        'CONFLICT',
      );
    });

    it("when the order does not exist, then NOT_FOUND; another user's order, FORBIDDEN; an amount unlike the order's, BAD_REQUEST", async () => {
      const tenant = uniqueTenant('rules');
      const owner = bearer(tenant, '950000021');
      const { caller: ordering } = await callerFor(withKey(owner));
      await ordering.orders.create({ merchantOrderNo: 'p-2', amount: '3.00' });
      const stranger = async () => (await callerFor(withKey(bearer(tenant, '950000022')))).caller;
      expect(
        (await failure((await stranger()).payments.create({ merchantOrderNo: 'nope', amount: 3 }))).code,
      ).to.equal('NOT_FOUND');
      expect(
        (await failure((await stranger()).payments.create({ merchantOrderNo: 'p-2', amount: 3 }))).code,
      ).to.equal('FORBIDDEN');
      const { caller: wrong } = await callerFor(withKey(owner));
      expect((await failure(wrong.payments.create({ merchantOrderNo: 'p-2', amount: 4 }))).code).to.equal(
        'BAD_REQUEST',
      );
    });

    it("when an admin pays a user's order, then the payment is the user's to read", async () => {
      const tenant = uniqueTenant('rules');
      const owner = bearer(tenant, '950000023');
      const { caller: ordering } = await callerFor(withKey(owner));
      await ordering.orders.create({ merchantOrderNo: 'p-3', amount: '8.00' });
      const { caller: admin } = await callerFor(withKey(adminOf(tenant)));
      const paid = (await admin.payments.create({ merchantOrderNo: 'p-3', amount: 8 })) as {
        data: { id: string };
      };
      const { caller: reader } = await callerFor(owner);
      const read = (await reader.payments.get({ id: paid.data.id })) as { data: { id: string } };
      expect(read.data.id).to.equal(paid.data.id);
    });
  });
});
