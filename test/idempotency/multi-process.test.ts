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

  it('when 30 users race with their own keys on one merchantOrderNo, then one order; the rest get 409 40904', async () => {
    const tenant = uniqueTenant();
    const body = { merchantOrderNo: 'same-no', amount: 5 };
    // One user each: the race is about the business key; one user's burst meets the in-flight cap.
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        http('POST', '/orders', {
          headers: { ...bearer(tenant, String(700000100 + i)), 'Idempotency-Key': idempotencyKey() },
          body,
          baseUrl: instances[i % 3].url,
        }),
      ),
    );
    expect(answers.filter((a) => a.status === 201)).to.have.length(1);
    // The others lose on the unique index: 40904, or 503 with Retry-After when their bounded wait
    // on the winner's uncommitted row ended first (retried with the same key: 40904).
    const losers = answers.filter((a) => a.status !== 201);
    for (const a of losers) {
      expect([409, 503], a.text).to.include(a.status);
      if (a.status === 409) expect(a.body.code).to.equal(40904);
      else expect(a.headers.get('retry-after')).to.not.equal(null);
    }
    expect(losers).to.have.length(29);
  });
});
