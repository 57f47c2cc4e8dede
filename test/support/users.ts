import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { type HttpResult, http } from './http.js';
import { sharedServer } from './server.js';
import { bearer } from './tokens.js';

/** The sub of operator tokens: no user row has it (ids are small BIGSERIAL values). */
export const OPERATOR_ID = '900000001';

export interface UserBody {
  id: string;
  name: string;
  age: number;
  username: string | null;
  email: string | null;
  role: 'admin' | 'user';
  status: 'ACTIVE' | 'DISABLED';
  createdAt: string;
  updatedAt: string;
}

/** An operator admin token of the tenant (no user row behind it). */
export function adminOf(tenant: string): Record<string, string> {
  return bearer(tenant, OPERATOR_ID, 'admin');
}

let counter = 0;

/** A username (also usable as an e-mail local part) no other test uses. */
export function uniqueUsername(prefix = 'u'): string {
  counter += 1;
  return `${prefix}_${randomBytes(3).toString('hex')}${counter}`;
}

/** Factory: one user row per call, created over REST by the tenant's operator admin. */
/** A user made through the API; a `status` is set afterwards by PUT .../status (not a field of the create). */
export async function createUser(tenant: string, fields: Record<string, unknown> = {}): Promise<UserBody> {
  const { status, ...create } = fields;
  const res = await http('POST', '/api/v1/users', {
    headers: adminOf(tenant),
    body: { name: 'Test User', age: 30, ...create },
  });
  if (res.status !== 201) throw new Error(`createUser: ${res.status} ${res.text}`);
  const user = res.body.data as UserBody;
  if (status === undefined || status === user.status) return user;
  const set = await http('PUT', `/api/v1/users/${user.id}/status`, {
    headers: adminOf(tenant),
    body: { status },
  });
  if (set.status !== 200) throw new Error(`createUser: status ${set.status} ${set.text}`);
  return set.body.data as UserBody;
}

/** The raw database row of a user (snake_case columns), or undefined when there is none. */
export async function userRow(id: string): Promise<Record<string, unknown> | undefined> {
  const { sequelize } = (await sharedServer()).services;
  const rows = await sequelize.query<Record<string, unknown>>('SELECT * FROM users WHERE id = :id', {
    replacements: { id },
    type: QueryTypes.SELECT,
  });
  return rows[0];
}

/** Asserts the error envelope of CONTRACT sections 2 and 6. */
export function expectError(res: HttpResult, status: number, code = status): void {
  expect(res.status, res.text).to.equal(status);
  expect(res.headers.get('content-type')).to.match(/^application\/json/);
  expect(res.body).to.have.all.keys('code', 'message', 'data');
  expect(res.body.code).to.equal(code);
  expect(res.body.message).to.be.a('string').and.not.equal('');
  expect(res.body.data).to.equal(null);
}

/** Asserts a success envelope and returns its data. */
// biome-ignore lint/suspicious/noExplicitAny: tests read payloads of every shape
export function expectSuccess(res: HttpResult, status = 200): any {
  expect(res.status, res.text).to.equal(status);
  expect(res.headers.get('content-type')).to.match(/^application\/json/);
  expect(res.body).to.have.all.keys('code', 'message', 'data');
  expect(res.body.code).to.equal(200);
  expect(res.body.message).to.equal('Success');
  return res.body.data;
}
