import { expect } from 'chai';
import { http } from '../support/http.js';
import { idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation, trpcQuery } from '../support/trpc-http.js';
import { adminOf, createUser, expectError, expectSuccess } from '../support/users.js';

/**
 * Issue 26, defect 2: PostgreSQL stores a lone UTF-16 surrogate as U+FFFD, so a keyed create's
 * answer (built from its input) and GET disagreed. Every string field of every input refuses one.
 */
const HIGH = 'a\ud800b';
const LOW = 'a\udc00';

interface Case {
  label: string;
  rest: { method: string; path: (id: string) => string; body?: Record<string, unknown> };
  trpc: { kind: 'query' | 'mutation'; path: string; input: (id: string) => Record<string, unknown> };
  valid: Record<string, unknown>;
  field: string;
}

const user = { name: 'Ann', age: 30 };
const order = { merchantOrderNo: 'M-1', amount: '10.50' };
const replace = { name: 'Ann', age: 30, username: null, email: null };

function bodyCases(): Case[] {
  const list: Case[] = [];
  const add = (
    label: string,
    method: string,
    path: string,
    trpcPath: string,
    valid: Record<string, unknown>,
    fields: string[],
  ) => {
    for (const field of fields)
      list.push({
        label,
        rest: { method, path: (id) => path.replace('{id}', id), body: valid },
        trpc: {
          kind: 'mutation',
          path: trpcPath,
          input: (id) => (path.includes('{id}') ? { id, ...valid } : valid),
        },
        valid,
        field,
      });
  };
  add('POST /api/v1/users', 'POST', '/api/v1/users', 'users.create', user, [
    'name',
    'username',
    'email',
    'password',
  ]);
  add('PUT /api/v1/users/{id}', 'PUT', '/api/v1/users/{id}', 'users.replace', replace, [
    'name',
    'username',
    'email',
  ]);
  add('PATCH /api/v1/users/{id}', 'PATCH', '/api/v1/users/{id}', 'users.update', { age: 31 }, [
    'name',
    'email',
  ]);
  for (const [path, trpcPath] of [
    ['/api/v1/orders', 'orders.create'],
    ['/api/v1/payments', 'payments.create'],
  ])
    add(`POST ${path}`, 'POST', path, trpcPath, order, [
      'merchantOrderNo',
      'amount',
      'currency',
      'description',
      'traceId',
    ]);
  add(
    'POST /api/v1/tokens',
    'POST',
    '/api/v1/tokens',
    'tokens.create',
    { tenantId: 't1', username: 'ann', password: 'secret-1' },
    ['tenantId', 'username', 'password'],
  );
  return list;
}

describe('lone UTF-16 surrogates are refused in every string field (400 naming it)', () => {
  for (const c of bodyCases()) {
    for (const [which, value] of [
      ['high', HIGH],
      ['low', LOW],
    ]) {
      it(`when ${c.label} has a lone ${which} surrogate in ${c.field}, then 400 "${c.field}: ..." over REST and tRPC`, async () => {
        const tenant = uniqueTenant();
        const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
        const id = c.rest.path('{id}').includes('{id}') ? (await createUser(tenant)).id : '';
        const body = { ...c.valid, [c.field]: value };
        const rest = await http(c.rest.method, c.rest.path(id), { headers, body });
        expectError(rest, 400);
        expect(rest.body.message).to.match(new RegExp(`^${c.field}: `));
        const trpc = await trpcMutation(
          c.trpc.path,
          { ...c.trpc.input(id), [c.field]: value },
          {
            ...adminOf(tenant),
            'Idempotency-Key': idempotencyKey(),
          },
        );
        expect(trpc.status, trpc.text).to.equal(400);
        expect(trpc.body.error.message).to.match(new RegExp(`^${c.field}: `));
      });
    }
  }

  // A URL path cannot carry one (its percent-encoding is UTF-8, which has no surrogates); a tRPC
  // query's JSON input can.
  it('when a payment id (payments.get over tRPC) holds a lone surrogate, then 400 "id: ..."', async () => {
    const trpc = await trpcQuery('payments.get', { id: 'p\ud800' }, adminOf(uniqueTenant()));
    expect(trpc.status, trpc.text).to.equal(400);
    expect(trpc.body.error.message).to.match(/^id: /);
  });

  it('when the name holds astral characters (a surrogate pair), then 201 and GET returns it as sent', async () => {
    const tenant = uniqueTenant();
    const name = 'A 😀 𝔘 b';
    const created = expectSuccess(
      await http('POST', '/api/v1/users', {
        headers: { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() },
        body: { name, age: 5 },
      }),
      201,
    );
    expect(created.name).to.equal(name);
    expect(
      expectSuccess(await http('GET', `/api/v1/users/${created.id}`, { headers: adminOf(tenant) })).name,
    ).to.equal(name);
  });
});
