import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { setFailpoints } from '../../core/failpoints.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/**
 * The Mode A failpoints around the claim (idempotency/engine.ts), in the in-process server. A throw
 * after the claim used to escape the engine's try: the folded transaction (the PROCESSING record,
 * the key's lock, the user's slot) stayed open on its pooled connection until the server's idle
 * time-out, so a retry with the same key waited on that record and got 202 instead of executing.
 */
describe('failpoints around the Mode A claim (local.before-claim, local.after-claim)', () => {
  afterEach(() => setFailpoints(''));

  async function idleInTransaction(): Promise<number> {
    const { sequelize } = (await sharedServer()).services;
    const [row] = await sequelize.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
      { type: QueryTypes.SELECT },
    );
    return row.n;
  }

  for (const name of ['local.before-claim', 'local.after-claim'] as const) {
    it(`when ${name}=throw fires on a keyed create, then 503 with Retry-After, no connection is left in a transaction, and the retry with the same key creates the order at once`, async () => {
      const tenant = uniqueTenant('fp-claim');
      const headers = { ...bearer(tenant, '890000030'), 'Idempotency-Key': idempotencyKey() };
      const body = { merchantOrderNo: `mo-${name.replace('.', '-')}`, amount: '3.00' };
      setFailpoints(`${name}=throw@1`);
      const failed = await http('POST', '/api/v1/orders', { headers, body });
      expect(failed.status, failed.text).to.equal(503);
      expect(failed.headers.get('retry-after')).to.not.equal(null);
      expect(await idleInTransaction(), 'connections idle in a transaction').to.equal(0);
      const retry = await http('POST', '/api/v1/orders', { headers, body });
      expect(retry.status, retry.text).to.equal(201);
      expect(retry.headers.get('idempotent-replayed')).to.equal(null);
      const replay = await http('POST', '/api/v1/orders', { headers, body });
      expect(replay.status).to.equal(201);
      expect(replay.body).to.deep.equal(retry.body);
    });
  }
});
