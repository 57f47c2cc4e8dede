import { expect } from 'chai';
import { http } from '../support/http.js';
import { type Instance, killAll, startInstances } from '../support/processes.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

describe('idempotency across 3 real server processes', function () {
  this.timeout(120000);
  let instances: Instance[] = [];

  before(async () => {
    await sharedServer(); // migrations applied once before the processes start
    instances = await startInstances(3);
  });
  after(killAll);

  it('when 60 identical order creates race over 3 instances, then one order and every answer is its 201 or a 202', async () => {
    const tenant = uniqueTenant();
    const headers = { ...bearer(tenant, '700000001'), 'Idempotency-Key': idempotencyKey() };
    const body = { merchantOrderNo: `mo-${tenant}`, amount: '12.30' };
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        http('POST', '/api/v1/orders', { headers, body, baseUrl: instances[i % 3].url }),
      ),
    );
    const statuses = answers.map((a) => a.status);
    expect(
      statuses.every((s) => s === 201 || s === 202),
      statuses.join(','),
    ).to.equal(true);
    const ids = new Set(answers.filter((a) => a.status === 201).map((a) => a.body.data.id));
    expect(ids.size).to.equal(1);
    const { services } = await sharedServer();
    const [rows] = await services.sequelize.query(
      'SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1',
      {
        bind: [tenant],
      },
    );
    expect((rows as Array<{ n: number }>)[0].n).to.equal(1);
  });

  it('when 30 different keys race on one merchantOrderNo, then one order; the rest get 409 40904', async () => {
    const tenant = uniqueTenant();
    const auth = bearer(tenant, '700000002');
    const body = { merchantOrderNo: 'same-no', amount: 5 };
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        http('POST', '/orders', {
          headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
          body,
          baseUrl: instances[i % 3].url,
        }),
      ),
    );
    expect(answers.filter((a) => a.status === 201)).to.have.length(1);
    expect(answers.filter((a) => a.status === 409 && a.body.code === 40904)).to.have.length(29);
  });
});
