// Issue 26, defect 5 (CONTRACT section 5, amended): no per-field digest of a secret field in the
// record (a fast HMAC of a bare password beside a database dump is an offline guessing aid), a 40901
// that differs only in the password still names /password, and the user check precedes the scrypt
// hash (a DISABLED or demoted admin's token makes the service spend no scrypt time).
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { scopeKey } from '../../idempotency/key.js';
import { RECENT_KEYS_MAX } from '../../idempotency/recent-keys.js';
import { passwordsHashed } from '../../routers/auth/password.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation } from '../support/trpc-http.js';
import { adminOf, createUser, uniqueUsername } from '../support/users.js';

const PATHS = [
  { name: 'keyless', key: () => ({}) },
  { name: 'keyed', key: () => ({ 'Idempotency-Key': idempotencyKey() }) },
];

describe('passwords: no digest in the record, and no scrypt before the user check', () => {
  before(() => sharedServer());

  it('when a keyed create is retried with only another password, then 409 40901 names /password, and the record holds no digest of it', async () => {
    const tenant = uniqueTenant('pw');
    const key = idempotencyKey();
    const headers = { ...adminOf(tenant), 'Idempotency-Key': key };
    const body = { name: 'Pw', age: 3, username: uniqueUsername(), password: 'first-secret-1' };
    expect((await http('POST', '/api/v1/users', { headers, body })).status).to.equal(201);
    const again = await http('POST', '/api/v1/users', {
      headers,
      body: { ...body, password: 'other-secret-2' },
    });
    expect(again.status, again.text).to.equal(409);
    expect(again.body.code).to.equal(40901);
    expect(again.body.data).to.deep.equal({ mismatch: ['/password'] });
    const both = await http('POST', '/api/v1/users', {
      headers,
      body: { ...body, age: 4, password: 'x-secret-3' },
    });
    expect(both.body.data).to.deep.equal({ mismatch: ['/age'] });

    const { sequelize } = (await sharedServer()).services;
    const [record] = await sequelize.query<{ field_hashes: string }>(
      'SELECT field_hashes FROM idempotency_records WHERE scope_key = :scope',
      {
        replacements: { scope: scopeKey(tenant, '900000001', 'users.create', key) },
        type: QueryTypes.SELECT,
      },
    );
    const fields = JSON.parse(record.field_hashes) as Record<string, string>;
    expect(fields.name).to.match(/^[0-9a-f]{32}$/);
    expect(fields.password).to.not.match(/[0-9a-f]{16}/);
  });

  for (const path of PATHS) {
    it(`when a DISABLED admin or a demoted admin creates a user with a password (${path.name}), then 403 and no password is hashed; an active admin's create hashes one`, async () => {
      const tenant = uniqueTenant('pw');
      const disabled = await createUser(tenant, { role: 'admin', status: 'DISABLED' });
      const demoted = await createUser(tenant, { role: 'user' });
      for (const who of [disabled, demoted]) {
        const before = passwordsHashed();
        const res = await http('POST', '/api/v1/users', {
          headers: { ...bearer(tenant, who.id, 'admin'), ...path.key() },
          body: { name: 'Nope', age: 3, password: 'never-hashed-1' },
        });
        expect(res.status, res.text).to.equal(403);
        expect(passwordsHashed() - before, `${who.status} ${who.role}`).to.equal(0);
      }
      const admin = await createUser(tenant, { role: 'admin' });
      const before = passwordsHashed();
      const res = await http('POST', '/api/v1/users', {
        headers: { ...bearer(tenant, admin.id, 'admin'), ...path.key() },
        body: { name: 'Yes', age: 3, password: 'hashed-once-1' },
      });
      expect(res.status, res.text).to.equal(201);
      expect(passwordsHashed() - before).to.equal(1);
    });
  }

  it('when a keyed create with a password is replayed (REST and tRPC, a key this process saw lately or not) or retried with another password, then the password is hashed once, by the first request only', async () => {
    const tenant = uniqueTenant('pw');
    const key = idempotencyKey();
    const headers = { ...adminOf(tenant), 'Idempotency-Key': key };
    const body = { name: 'Once', age: 5, username: uniqueUsername(), password: 'hashed-only-once-1' };
    const before = passwordsHashed();
    const first = await http('POST', '/api/v1/users', { headers, body });
    expect(first.status, first.text).to.equal(201);
    expect(passwordsHashed() - before).to.equal(1);

    const { recent } = (await sharedServer()).services.idempotency;
    const forget = () => {
      for (let i = 0; i < RECENT_KEYS_MAX; i += 1) recent.add(`forget-${i}`);
    };
    for (const seen of [true, false]) {
      if (!seen) forget();
      const rest = await http('POST', '/api/v1/users', { headers, body });
      expect(rest.status, rest.text).to.equal(201);
      expect(rest.headers.get('idempotent-replayed')).to.equal('true');
      expect(rest.body.data).to.deep.equal(first.body.data);
      if (!seen) forget();
      const trpc = await trpcMutation('users.create', body, headers);
      expect(trpc.status, trpc.text).to.equal(200);
      expect(trpc.body.result.data.data).to.deep.equal(first.body.data);
      if (!seen) forget();
      const other = await http('POST', '/api/v1/users', {
        headers,
        body: { ...body, password: 'other-pw-2' },
      });
      expect(other.status, other.text).to.equal(409);
      expect(other.body.data).to.deep.equal({ mismatch: ['/password'] });
      expect(passwordsHashed() - before, seen ? 'a key seen lately' : 'a key not seen lately').to.equal(1);
    }
  });
});
