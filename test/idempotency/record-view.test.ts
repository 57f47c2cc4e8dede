import { readdirSync, readFileSync } from 'node:fs';
import { expect } from 'chai';
import { READ_RECORD_SQL } from '../../idempotency/record-store.js';
import { sharedServer } from '../support/server.js';

async function sql<R>(text: string, values: unknown[] = []): Promise<R[]> {
  const { sequelize } = (await sharedServer()).services;
  const [rows] = await sequelize.query(text, { bind: values });
  return rows as R[];
}

// The expression only a reader of a record's lease writes: every function that computes it reads the
// record's columns itself.
const LEASE_LEFT = 'EXTRACT(EPOCH FROM r.lease_until - now())';

describe('idempotency: the record is read through one function (issue 26)', () => {
  it('when the database functions are listed, then only idem_record_view computes what a reader sees of a record', async () => {
    const rows = await sql<{ name: string }>(
      `SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND strpos(p.prosrc, $1) > 0 ORDER BY 1`,
      [LEASE_LEFT],
    );
    expect(rows.map((r) => r.name)).to.deep.equal(['idem_record_view']);
    for (const caller of ['idem_auth_read', 'idem_execute']) {
      const [def] = await sql<{ src: string }>(
        'SELECT prosrc AS src FROM pg_proc WHERE proname = $1 ORDER BY oid DESC LIMIT 1',
        [caller],
      );
      expect(def.src, caller).to.contain('idem_record_view(p_scope_key)');
    }
  });

  it('when the service reads a record, then through idem_record_view, and no TypeScript file spells the columns out', () => {
    expect(READ_RECORD_SQL).to.equal('SELECT * FROM idem_record_view($1)');
    const spelled: string[] = [];
    for (const dir of ['idempotency', 'routers', 'payments', 'server', 'events']) {
      for (const file of readdirSync(dir, { recursive: true }) as string[]) {
        if (!file.endsWith('.ts')) continue;
        if (readFileSync(`${dir}/${file}`, 'utf8').includes('AS "leaseLeftMs"'))
          spelled.push(`${dir}/${file}`);
      }
    }
    expect(spelled).to.deep.equal([]);
  });

  it('when a caller reads a record, then PostgreSQL inlines the function (an index scan of the record, no function scan)', async () => {
    const plan = await sql<{ 'QUERY PLAN': string }>(
      `EXPLAIN (COSTS OFF) SELECT u.id, r.* FROM (SELECT 1) one
         LEFT JOIN users u ON u.id = 1 LEFT JOIN LATERAL idem_record_view('k') r ON true`,
    );
    const text = plan.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).to.not.contain('Function Scan');
    expect(text).to.contain('idempotency_records');
  });
});
