import { spawn } from 'node:child_process';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { type Instance, startInstance } from '../support/processes.js';
import { sharedServer } from '../support/server.js';

/**
 * Failpoints are test machinery (core/failpoints.ts): a production process refuses to start with
 * them, and their control route exists only where FAILPOINTS_CONTROL=1 mounted it.
 */
describe('failpoints never reach production', function () {
  this.timeout(60000);

  const PRODUCTION = {
    NODE_ENV: 'production',
    JWT_SECRET: 'a-production-secret-0123456789',
    IDEMPOTENCY_HMAC_KEY: 'a-production-hmac-key-012345',
    RESPONSE_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
    PAYMENT_GATEWAY_URL: 'http://127.0.0.1:9',
    LOG_LEVEL: 'silent',
  };

  async function start(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
      env: { PATH: process.env.PATH ?? '', ...PRODUCTION, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    return { code, stderr };
  }

  for (const [variable, value] of [
    ['FAILPOINTS', 'payment.charge.after=sigkill@1'],
    ['FAILPOINTS_CONTROL', '1'],
  ] as const) {
    it(`when the server process starts with ${variable}=${value} and NODE_ENV=production, then it exits 1 with one line naming ${variable}`, async () => {
      const { code, stderr } = await start({ [variable]: value });
      expect(code, stderr).to.equal(1);
      expect(stderr.trim().split('\n'), stderr).to.have.length(1);
      expect(stderr).to.include(`${variable}: never allowed with NODE_ENV=production`);
    });
  }

  it('when FAILPOINTS_CONTROL is not set, then PUT /__failpoints is no route: 404 in the envelope, and nothing is armed', async () => {
    const res = await http('PUT', '/__failpoints', {
      raw: 'local.before-claim=throw',
      headers: { 'Content-Type': 'text/plain' },
    });
    expect(res.status, res.text).to.equal(404);
    expect(res.body).to.include({ code: 404, data: null });
    expect(res.body.message).to.be.a('string');
    const { config } = (await sharedServer()).services;
    expect(config.FAILPOINTS_CONTROL).to.equal('0');
  });

  describe('with FAILPOINTS_CONTROL=1 (outside production)', () => {
    let instance: Instance | undefined;
    after(async () => {
      await instance?.stop();
    });

    it('when FAILPOINTS_CONTROL=1 is set, then the same PUT arms failpoints (204) and an unknown name is answered 400: the route the 404 above proves absent', async () => {
      await sharedServer(); // migrations applied before the process starts
      instance = await startInstance({ FAILPOINTS_CONTROL: '1' });
      // Plain fetch: a test-only route is not in /openapi.json (http() records answers for that check).
      const put = async (raw: string) => {
        const res = await fetch(`${instance?.url}/__failpoints`, { method: 'PUT', body: raw });
        const text = await res.text();
        return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
      };
      expect((await put('purge.batch=stall(1)')).status).to.equal(204);
      const unknown = await put('nowhere=throw');
      expect(unknown.status, unknown.text).to.equal(400);
      expect(unknown.body.message).to.include('unknown failpoint');
      expect((await put('')).status).to.equal(204);
    });
  });
});
