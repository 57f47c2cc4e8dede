// Issue 26, defect 3: createdAt came from three clocks (the keyless create: the database's now(); the
// keyed create in one statement: the service's; the general path: the auth read's database time), and
// updatedAt could be < createdAt under clock skew. Two real instances whose clocks are 5 minutes
// ahead of and behind the database's (test/support/skewed-clock.mjs): every path's createdAt is its
// instance's clock, updatedAt >= createdAt after an update on the other instance, and paging through
// the list after interleaved creates on both shows every row once.
import path from 'node:path';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { http } from '../support/http.js';
import { type Instance, startInstance } from '../support/processes.js';
import { sharedServer } from '../support/server.js';
import { idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf } from '../support/users.js';

const SKEW_MS = 5 * 60_000;
const clock = path.resolve('test/support/skewed-clock.mjs');

/** The database's clock now, in ms. */
async function dbNow(): Promise<number> {
  const { sequelize } = (await sharedServer()).services;
  const [row] = await sequelize.query<{ t: Date }>('SELECT now() AS t', { type: QueryTypes.SELECT });
  return row.t.getTime();
}

describe('ids and times over two instances with skewed clocks', function () {
  this.timeout(120000);
  let ahead: Instance;
  let behind: Instance;
  before(async () => {
    await sharedServer();
    // `behind` sends every keyed create to the general path (a failpoint between claim and commit).
    ahead = await startInstance({ NODE_OPTIONS: `--import=${clock}`, CLOCK_SKEW_MS: String(SKEW_MS) });
    behind = await startInstance({
      NODE_OPTIONS: `--import=${clock}`,
      CLOCK_SKEW_MS: String(-SKEW_MS),
      FAILPOINTS: 'local.before-commit=stall(1)',
    });
  });
  after(async () => {
    await ahead?.stop();
    await behind?.stop();
  });

  async function create(on: Instance, tenant: string, keyed: boolean, name: string) {
    const headers = { ...adminOf(tenant), ...(keyed ? { 'Idempotency-Key': idempotencyKey() } : {}) };
    const res = await http('POST', '/api/v1/users', { headers, body: { name, age: 3 }, baseUrl: on.url });
    expect(res.status, res.text).to.equal(201);
    return res.body.data as { id: string; createdAt: string; updatedAt: string };
  }

  it("when users are created on every path, then each createdAt is its instance's clock (one source), and an update elsewhere never makes updatedAt < createdAt", async () => {
    const tenant = uniqueTenant('clock');
    const cases = [
      { on: ahead, keyed: false, skew: SKEW_MS, path: 'keyless' },
      { on: ahead, keyed: true, skew: SKEW_MS, path: 'keyed, one statement' },
      { on: behind, keyed: false, skew: -SKEW_MS, path: 'keyless' },
      { on: behind, keyed: true, skew: -SKEW_MS, path: 'keyed, general path' },
    ];
    for (const c of cases) {
      const now = await dbNow();
      const user = await create(c.on, tenant, c.keyed, c.path);
      const off = new Date(user.createdAt).getTime() - now;
      expect(Math.abs(off - c.skew), `${c.path}: createdAt ${off} ms off the database`).to.be.below(60_000);
      const other = c.on === ahead ? behind : ahead;
      const res = await http('PATCH', `/api/v1/users/${user.id}`, {
        headers: adminOf(tenant),
        body: { age: 4 },
        baseUrl: other.url,
      });
      expect(res.status, res.text).to.equal(200);
      const updated = res.body.data as { createdAt: string; updatedAt: string };
      expect(updated.createdAt).to.equal(user.createdAt);
      expect(new Date(updated.updatedAt).getTime(), c.path).to.be.at.least(
        new Date(updated.createdAt).getTime(),
      );
    }
  });

  it('when creates interleave on both instances, then paging through the list shows every row exactly once, ids unique', async () => {
    const tenant = uniqueTenant('page');
    const made: string[] = [];
    for (let i = 0; i < 24; i++) {
      const on = i % 2 === 0 ? ahead : behind;
      made.push((await create(on, tenant, i % 3 === 0, `p${i}`)).id);
    }
    expect(new Set(made).size).to.equal(made.length);
    const seen: string[] = [];
    for (let page = 1; page <= 5; page++) {
      const res = await http('GET', `/api/v2/users?page=${page}&size=7`, { headers: adminOf(tenant) });
      expect(res.status, res.text).to.equal(200);
      seen.push(...(res.body.data.items as Array<{ id: string }>).map((u) => u.id));
    }
    expect([...seen].sort()).to.deep.equal([...made].sort());
  });
});
