import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { migrationNames } from '../../models/migrate.js';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { type Instance, killAll, startInstance } from '../support/processes.js';
import { bearer, uniqueTenant } from '../support/tokens.js';

describe('start-up: instances migrating one fresh database at once', function () {
  this.timeout(120000);
  let db: IsolatedDatabase;

  before(async () => {
    db = await createIsolatedDatabase('startup');
  });
  after(async () => {
    await killAll();
    await db?.drop();
  });

  it('when 3 instances start together on an empty database, then all become ready and each migration ran once', async () => {
    const instances: Instance[] = await Promise.all(
      [1, 2, 3].map(() => startInstance({ DATABASE_URL: db.url })),
    );
    const rows = await db.sequelize.query<{ name: string }>(
      'SELECT name FROM "SequelizeMeta" ORDER BY name',
      {
        type: QueryTypes.SELECT,
      },
    );
    expect(rows.map((r) => r.name)).to.deep.equal(await migrationNames());
    for (const instance of instances) {
      const ready = await http('GET', '/readyz', { baseUrl: instance.url });
      expect(ready.status).to.equal(200);
      const list = await http('GET', '/api/v1/users', {
        baseUrl: instance.url,
        headers: bearer(uniqueTenant(), '1', 'admin'),
      });
      expect(list.status).to.equal(200);
    }
  });
});
