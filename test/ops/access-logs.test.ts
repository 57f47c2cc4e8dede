import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { type Instance, killAll, startInstance } from '../support/processes.js';
import { idempotencyKey, tokenFor, uniqueTenant } from '../support/tokens.js';
import { OPERATOR_ID, uniqueUsername } from '../support/users.js';

interface AccessLine {
  reqId?: unknown;
  route?: unknown;
  res?: { statusCode?: unknown };
  req?: { method?: unknown; url?: unknown };
  responseTime?: unknown;
  idempotency?: unknown;
}

/** The access-log lines (one per answer, with responseTime) of one request id. */
function accessLines(output: string, requestId: string): AccessLine[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as AccessLine)
    .filter((l) => l.responseTime !== undefined && l.reqId === requestId);
}

describe('ops: structured access logs of a real process (LOG_LEVEL=info)', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('logs');
    instance = await startInstance({ DATABASE_URL: db.url, LOG_LEVEL: 'info' });
  });
  after(async () => {
    await killAll();
    await db?.drop();
  });

  it('when requests carry a token, a request id, a password and an email, then each access line is JSON with id, route template, status, time and outcome, and no secret is logged', async () => {
    const tenant = uniqueTenant('logs');
    const adminToken = tokenFor(tenant, OPERATOR_ID, 'admin');
    const requestId = `req-logs-${randomBytes(6).toString('hex')}`;
    const headers = { Authorization: `Bearer ${adminToken}`, 'X-Request-Id': requestId };
    const username = uniqueUsername('log');
    const email = `${username}.private@example.org`;
    const password = `pw-${randomBytes(9).toString('hex')}`;
    const body = { name: 'Logged User', age: 33, username, email, password };
    const key = idempotencyKey();
    const base = instance.url;

    const created = await http('POST', '/api/v1/users', {
      baseUrl: base,
      headers: { ...headers, 'Idempotency-Key': key },
      body,
    });
    expect(created.status, created.text).to.equal(201);
    const userId: string = created.body.data.id;
    const replayed = await http('POST', '/api/v1/users', {
      baseUrl: base,
      headers: { ...headers, 'Idempotency-Key': key },
      body,
    });
    expect(replayed.headers.get('idempotent-replayed')).to.equal('true');
    // A clash on the e-mail: an error path, which must not log the value either.
    const clash = await http('POST', '/api/v1/users', {
      baseUrl: base,
      headers: { ...headers, 'Idempotency-Key': idempotencyKey() },
      body: { ...body, username: uniqueUsername('log') },
    });
    expect(clash.status, clash.text).to.equal(409);
    // A key on a GET is ignored: no idempotency outcome may be logged for it.
    const got = await http('GET', `/api/v1/users/${userId}`, {
      baseUrl: base,
      headers: { ...headers, 'Idempotency-Key': idempotencyKey() },
    });
    expect(got.status).to.equal(200);
    const login = await http('POST', '/api/v1/tokens', {
      baseUrl: base,
      headers: { 'X-Request-Id': requestId },
      body: { tenantId: tenant, username, password },
    });
    expect(login.status, login.text).to.equal(201);
    const issuedToken: string = login.body.data.token;

    // pino writes asynchronously: wait (bounded) until the five answers are logged.
    const deadline = Date.now() + 10000;
    while (accessLines(instance.output(), requestId).length < 5 && Date.now() < deadline) await sleep(50);
    const output = instance.output();

    const lines = output.split('\n').filter((l) => l.trim() !== '');
    for (const line of lines) expect(() => JSON.parse(line), `not a JSON log line: ${line}`).to.not.throw();

    const mine = accessLines(output, requestId);
    expect(mine.map((l) => [l.req?.method, l.route, l.res?.statusCode, l.idempotency])).to.deep.equal([
      ['POST', '/api/v1/users', 201, 'executed'],
      ['POST', '/api/v1/users', 201, 'replayed'],
      // The engine ran it and stored the request-caused failure: FAILED_FINAL.
      ['POST', '/api/v1/users', 409, 'failed_final'],
      ['GET', '/api/v1/users/{id}', 200, undefined],
      ['POST', '/api/v1/tokens', 201, undefined],
    ]);
    for (const l of mine) {
      expect(l.responseTime).to.be.a('number').that.is.at.least(0);
      expect(String(l.route).split('/'), 'a raw id in the route label').to.not.include(userId);
    }

    for (const [name, secret] of Object.entries({ adminToken, issuedToken, password, email })) {
      expect(output.includes(secret), `${name} appears in the log output`).to.equal(false);
    }
    expect(output).to.not.match(/bearer /i);
  });
});
