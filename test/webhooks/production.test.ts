import { expect } from 'chai';
import pg from 'pg';
import { ResponseCipher } from '../../idempotency/response-cipher.js';
import { openReply } from '../../idempotency/stored-reply.js';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { type Instance, startInstance } from '../support/processes.js';
import { stopSharedServer, TEST_ENV } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { Receiver, retireEndpoints, until } from './receiver.js';

const PATH = '/api/v1/webhook-endpoints';

/**
 * NODE_ENV=production: the private-network refusal (SSRF) at creation and again at delivery, and the
 * secret in no log line (debug level) and no stored answer. One instance at a time, so the one that
 * runs an attempt is known (the shared in-process server is stopped first).
 */
const PRODUCTION = {
  NODE_ENV: 'production',
  // Never called: orders need no gateway, but production refuses the bundled simulator.
  PAYMENT_GATEWAY_URL: 'http://127.0.0.1:9',
  LOG_LEVEL: 'debug',
  WEBHOOK_TIMEOUT_MS: '3000',
  WEBHOOK_RETRY_BASE_MS: '300',
};

describe('webhooks in production mode: private networks refused, the secret never logged or stored', function () {
  this.timeout(180_000);
  const receiver = new Receiver();
  const tenant = uniqueTenant();
  const admin = bearer(tenant, '1', 'admin');
  const name = `prod-${tenant}`;
  let endpointId = '';
  let instance: Instance | undefined;

  before(async () => {
    await stopSharedServer();
    await receiver.start();
    receiver.hook(name);
  });

  afterEach(async () => {
    instance?.kill();
    await instance?.exited;
    instance = undefined;
  });

  after(async () => {
    await receiver.stop();
    await retireEndpoints(receiver.port);
  });

  it('when WEBHOOK_ALLOW_PRIVATE_NETWORKS=1, then a loopback endpoint is created and receives events, and the secret is in no log line and no stored answer', async () => {
    instance = await startInstance({ ...PRODUCTION, WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1' });
    const key = idempotencyKey();
    const body = { url: receiver.url(name) };
    const first = await http('POST', PATH, {
      baseUrl: instance.url,
      headers: { ...admin, 'Idempotency-Key': key },
      body,
    });
    expect(first.status, first.text).to.equal(201);
    const secret: string = first.body.data.secret;
    endpointId = first.body.data.id;
    receiver.setSecret(name, secret);
    const replay = await http('POST', PATH, {
      baseUrl: instance.url,
      headers: { ...admin, 'Idempotency-Key': key },
      body,
    });
    expect(replay.body.data.secret).to.equal(null);
    await createOrder(instance.url, admin, 'mo-prod-1');
    await until('delivered', () => receiver.of(name).some((r) => r.accepted && r.verified));

    const raw = secret.slice('whsec_'.length);
    // The attempt's debug line (written after its result) is there, without the secret.
    await until('the attempt logged', () => instance?.output().includes('webhook attempt') === true);
    expect(instance.output()).not.to.include(raw);
    const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await client.connect();
    try {
      const records = await client.query<{ scope_key: string; response_body: string }>(
        'SELECT scope_key, response_body FROM idempotency_records WHERE scope_key LIKE $1',
        [`%${tenant}%`],
      );
      expect(records.rows.length).to.be.greaterThan(0);
      const cipher = new ResponseCipher('k1', Buffer.from(TEST_ENV.RESPONSE_ENCRYPTION_KEY, 'base64'));
      for (const r of records.rows) {
        expect(JSON.stringify(openReply(cipher, r.scope_key, r.response_body).body)).not.to.include(raw);
      }
      const rows = await client.query('SELECT * FROM webhook_endpoints WHERE id = $1', [endpointId]);
      expect(JSON.stringify(rows.rows)).not.to.include(raw);
    } finally {
      await client.end();
    }
  });

  it('when private networks are not allowed, then loopback, private, link-local and metadata URLs are refused with 400, and an existing loopback endpoint gets no request (checked again at delivery)', async () => {
    instance = await startInstance(PRODUCTION);
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost/hook',
      'http://[::1]/hook',
      'http://10.1.2.3/hook',
      'http://192.168.0.10/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[::ffff:127.0.0.1]/hook',
    ]) {
      const res = await http('POST', PATH, { baseUrl: instance.url, headers: admin, body: { url } });
      expect(res.status, `${url}: ${res.text}`).to.equal(400);
      expect(res.body.message).to.match(/^url: /);
    }
    // The endpoint of the first test (created where it was allowed) still points at loopback.
    const before = receiver.of(name).length;
    await createOrder(instance.url, admin, 'mo-prod-2');
    await until('an attempt refused at delivery', async () => {
      const res = await http('GET', `${PATH}/${endpointId}/deliveries`, {
        baseUrl: instance?.url,
        headers: admin,
      });
      const latest = res.body.data[0];
      return (
        latest?.type === 'order.created' && latest.attempts >= 1 && /loopback/.test(latest.lastError ?? '')
      );
    });
    expect(receiver.of(name).length).to.equal(before);
  });
});
