// The user row's rule (issue 26, "One rule, one place") has one SQL definition, idem_user_admits
// (migration 20261126000002, called by user_insert_checked and idem_execute), and one TypeScript
// definition, routers/auth/who.ts admitted (the paths that read the row first). The first part holds
// the two to the same answer in every case; the second runs the whole matrix through every path a
// create can take and compares answers and rows written with that rule.
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { setFailpoints } from '../../core/failpoints.js';
import type { Identity } from '../../routers/auth/jwt.js';
import { admitted, type UserRow } from '../../routers/auth/who.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { createUser } from '../support/users.js';

type Role = 'admin' | 'user';
const ROLES: Role[] = ['admin', 'user'];
const STATUSES = ['ACTIVE', 'DISABLED'] as const;

/** Where the token's user has a row: none at all, one in another tenant, or one in the token's. */
type Place = 'no row' | 'other tenant' | 'same tenant';
interface Case {
  tokenRole: Role;
  place: Place;
  rowRole: Role;
  status: (typeof STATUSES)[number];
}

const CASES: Case[] = ROLES.flatMap((tokenRole) => [
  { tokenRole, place: 'no row' as Place, rowRole: 'user' as Role, status: 'ACTIVE' as const },
  ...(['other tenant', 'same tenant'] as Place[]).flatMap((place) =>
    ROLES.flatMap((rowRole) => STATUSES.map((status) => ({ tokenRole, place, rowRole, status }))),
  ),
]);
const label = (c: Case) =>
  `token ${c.tokenRole}, ${c.place}${c.place === 'no row' ? '' : ` (${c.rowRole}, ${c.status})`}`;

/** The case's token identity, with its user's row made as the case says. */
async function identityOf(c: Case): Promise<Identity> {
  const tenant = uniqueTenant('rule');
  if (c.place === 'no row') return { tenantId: tenant, userId: '910000001', role: c.tokenRole };
  const rowTenant = c.place === 'same tenant' ? tenant : uniqueTenant('rule-other');
  const row = await createUser(rowTenant, { role: c.rowRole, status: c.status });
  return { tenantId: tenant, userId: row.id, role: c.tokenRole };
}

/** The row the rule reads, as the TypeScript side gets it. */
const rowOf = (c: Case): UserRow =>
  c.place === 'same tenant' ? { status: c.status, role: c.rowRole } : undefined;

/** The TypeScript rule's answer: the 403 message, or null (admitted). */
function tsRefusal(id: Identity, c: Case, adminOnly: boolean): string | null {
  try {
    admitted(id, rowOf(c), adminOnly);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

describe('the user row rule: one SQL definition (idem_user_admits) and one TypeScript (who.ts admitted)', () => {
  before(() => sharedServer());

  for (const c of CASES) {
    it(`when ${label(c)}, then SQL and TypeScript admit the same writes and read the same row`, async () => {
      const id = await identityOf(c);
      const { sequelize } = (await sharedServer()).services;
      for (const adminOnly of [false, true]) {
        const [sql] = await sequelize.query<{
          status: string | null;
          role: string | null;
          admitted: boolean;
        }>('SELECT * FROM idem_user_admits(:user::bigint, :tenant, :role, :adminOnly)', {
          replacements: { user: id.userId, tenant: id.tenantId, role: id.role, adminOnly },
          type: QueryTypes.SELECT,
        });
        expect(sql.admitted, `adminOnly ${adminOnly}`).to.equal(tsRefusal(id, c, adminOnly) === null);
        const row = rowOf(c);
        expect({ status: sql.status, role: sql.role }).to.deep.equal({
          status: row?.status ?? null,
          role: row?.role ?? null,
        });
      }
    });
  }
});

type Path = 'keyless' | 'keyed, one statement' | 'keyed, general path';
const PATHS: Path[] = ['keyless', 'keyed, one statement', 'keyed, general path'];
const OPS = [
  {
    name: 'users.create',
    rest: '/api/v1/users',
    adminOnly: true,
    table: 'users',
    body: (n: string) => ({ name: n, age: 3 }),
  },
  {
    name: 'orders.create',
    rest: '/api/v1/orders',
    adminOnly: false,
    table: 'orders',
    body: (n: string) => ({ merchantOrderNo: n, amount: '1.00' }),
  },
];

/** Rows of the operation's table the request wrote, found by the unique name it sent. */
async function written(table: string, tenant: string, n: string): Promise<number> {
  const { sequelize } = (await sharedServer()).services;
  const column = table === 'users' ? 'name' : 'merchant_order_no';
  const [row] = await sequelize.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${table} WHERE tenant_id = :tenant AND ${column} = :n`,
    { replacements: { tenant, n }, type: QueryTypes.SELECT },
  );
  return row.n;
}

describe('the user row rule through every path: role × status × tenant × keyed/keyless × REST/tRPC', () => {
  // An armed failpoint between claim and commit (a 1 ms stall) sends a keyed create to the general
  // path: the auth read first, then the claim (idempotency/engine.ts atOnceAvailable).
  afterEach(() => setFailpoints(''));

  for (const op of OPS) {
    // orders.create requires a key (CONTRACT): it has no keyless path.
    for (const path of PATHS.filter((p) => op.name === 'users.create' || p !== 'keyless')) {
      it(`${op.name}, ${path}: every case answers as the rule says, on REST and tRPC, and writes only when admitted`, async () => {
        setFailpoints(path === 'keyed, general path' ? 'local.before-commit=stall(1)' : '');
        const failures: string[] = [];
        for (const c of CASES) {
          const id = await identityOf(c);
          const refusal = tsRefusal(id, c, op.adminOnly);
          for (const transport of ['rest', 'trpc'] as const) {
            const n = `${op.table === 'users' ? 'N' : 'M'}-${idempotencyKey()}`;
            const headers = {
              ...bearer(id.tenantId, id.userId, id.role),
              ...(path === 'keyless' ? {} : { 'Idempotency-Key': idempotencyKey() }),
            };
            const url = transport === 'rest' ? op.rest : `/trpc/${op.name}`;
            const res = await http('POST', url, { headers, body: op.body(n) });
            const status = transport === 'rest' || res.status !== 200 ? res.status : 201;
            const message = transport === 'rest' ? res.body?.message : res.body?.error?.message;
            const got = status === 201 ? null : `${status} ${message}`;
            const want = refusal === null ? null : `403 ${refusal}`;
            const rows = await written(op.table, id.tenantId, n);
            if (got !== want || rows !== (refusal === null ? 1 : 0)) {
              failures.push(
                `${label(c)} over ${transport}: ${got ?? 'created'} (want ${want ?? 'created'}), ${rows} rows`,
              );
            }
          }
        }
        expect(failures, failures.join('\n')).to.deep.equal([]);
      });
    }
  }
});
