// Regression tests of issue 10, defect 8 (each failed before the change): IDEMPOTENCY_LEASE_MS=2000
// alone was refused (GATEWAY_TIMEOUT_MS defaulted to 5000); only the first invalid variable was
// named; previous response keys of 30–48 bytes were accepted for AES-256.
import { spawn } from 'node:child_process';
import { expect } from 'chai';
import { ConfigError, derivedGatewayTimeout, loadConfig } from '../../core/config.js';

const key32 = Buffer.alloc(32, 1).toString('base64');
const key30 = Buffer.alloc(30, 1).toString('base64');

function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the configuration was accepted');
}

/** Starts the server process with only `env` (and PATH, silent logs); its exit code and stderr. */
async function startFails(env: Record<string, string>): Promise<{ code: unknown; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const code = await new Promise((resolve) => child.once('close', resolve));
  return { code, stderr };
}

describe('configuration (CONTRACT section 8)', () => {
  it('when IDEMPOTENCY_LEASE_MS=2000 is set alone, then it starts with a gateway time-out derived to fit twice in 3/4 of the lease', () => {
    const config = loadConfig({ IDEMPOTENCY_LEASE_MS: '2000' });
    expect(config.GATEWAY_TIMEOUT_MS).to.equal(750);
    expect(2 * config.GATEWAY_TIMEOUT_MS).to.be.at.most(2000 * 0.75);
  });

  it('when nothing is set, then the gateway time-out is 5 s (the lease of 30 s has room for it)', () => {
    expect(loadConfig({}).GATEWAY_TIMEOUT_MS).to.equal(5000);
  });

  it('when every lease the table allows is set alone, then each starts', () => {
    for (const lease of [100, 101, 999, 2000, 13333, 30000, 3600000]) {
      const config = loadConfig({ IDEMPOTENCY_LEASE_MS: String(lease) });
      expect(config.GATEWAY_TIMEOUT_MS).to.equal(derivedGatewayTimeout(lease));
      expect(2 * config.GATEWAY_TIMEOUT_MS, `lease ${lease}`).to.be.at.most(lease * 0.75);
    }
  });

  it('when an explicit gateway time-out does not fit in the lease, then the message names both variables', () => {
    const message = refusal({ IDEMPOTENCY_LEASE_MS: '2000', GATEWAY_TIMEOUT_MS: '1000' });
    expect(message).to.match(/GATEWAY_TIMEOUT_MS/);
    expect(message).to.match(/IDEMPOTENCY_LEASE_MS/);
  });

  it('when NODE_ENV=production comes without its secrets, then one message names every one of them', () => {
    const message = refusal({ NODE_ENV: 'production' });
    for (const name of ['JWT_SECRET', 'IDEMPOTENCY_HMAC_KEY', 'RESPONSE_ENCRYPTION_KEY'])
      expect(message).to.include(`${name}:`);
    expect(message).to.not.include('PAYMENT_GATEWAY_URL');
  });

  it('when NODE_ENV=production comes with its secrets but no PAYMENT_GATEWAY_URL, then it starts (CONTRACT section 8: unset, the bundled simulator; a warning is logged)', () => {
    const config = loadConfig({
      NODE_ENV: 'production',
      JWT_SECRET: 'a-production-secret-0123456789',
      IDEMPOTENCY_HMAC_KEY: 'a-production-hmac-key-012345',
      RESPONSE_ENCRYPTION_KEY: key32,
    });
    expect(config.PAYMENT_GATEWAY_URL).to.equal(undefined);
  });

  it('when a number is not written in decimal digits, a key is not strict base64, or the gateway URL is not http(s), then start is refused naming the variable', () => {
    const cases: Array<[Record<string, string>, string]> = [
      // The message says what to write (it read "Invalid input" before 2026-11-28: zod's own for a union).
      [{ PORT: '0x0CA5' }, 'PORT: must be a decimal integer'],
      [{ IDEMPOTENCY_WAIT_MS: '1e3' }, 'IDEMPOTENCY_WAIT_MS: must be a decimal integer'],
      [{ IDEMPOTENCY_LEASE_MS: ' 2000' }, 'IDEMPOTENCY_LEASE_MS: must be a decimal integer'],
      [{ GATEWAY_TIMEOUT_MS: '0x20' }, 'GATEWAY_TIMEOUT_MS: must be a decimal integer'],
      [{ IDEMPOTENCY_TTL_HOURS: '0x10' }, 'IDEMPOTENCY_TTL_HOURS: must be a decimal number'],
      [{ EXPORT_TTL_HOURS: 'Infinity' }, 'EXPORT_TTL_HOURS: must be a decimal number'],
      [{ RESPONSE_ENCRYPTION_KEY: `!!!!${key32}` }, 'RESPONSE_ENCRYPTION_KEY:'],
      [{ RESPONSE_ENCRYPTION_PREVIOUS_KEYS: `k0:!!!!${key32}` }, 'RESPONSE_ENCRYPTION_PREVIOUS_KEYS:'],
      [{ PAYMENT_GATEWAY_URL: 'ftp://127.0.0.1/x' }, 'PAYMENT_GATEWAY_URL:'],
    ];
    for (const [env, name] of cases) expect(refusal(env), JSON.stringify(env)).to.include(name);
    const config = loadConfig({
      PORT: '3237',
      IDEMPOTENCY_TTL_HOURS: '0.5',
      GATEWAY_TIMEOUT_MS: '900',
      RESPONSE_ENCRYPTION_KEY: key32,
      PAYMENT_GATEWAY_URL: 'https://gateway.example',
    });
    expect(config).to.include({ PORT: 3237, IDEMPOTENCY_TTL_HOURS: 0.5, GATEWAY_TIMEOUT_MS: 900 });
  });

  it('when several variables are invalid, then every one is named in one line', () => {
    const message = refusal({ PORT: 'eighty', IDEMPOTENCY_WAIT_MS: '-1', LOG_LEVEL: 'loud' });
    expect(message.split('\n')).to.have.length(1);
    for (const name of ['PORT:', 'IDEMPOTENCY_WAIT_MS:', 'LOG_LEVEL:']) expect(message).to.include(name);
  });

  it('when PURGE_BUSY_PERCENT is outside 1–100, then start is refused naming it; unset, the purge is paced at 25%', () => {
    expect(refusal({ PURGE_BUSY_PERCENT: '0' })).to.include('PURGE_BUSY_PERCENT:');
    expect(refusal({ PURGE_BUSY_PERCENT: '101' })).to.include('PURGE_BUSY_PERCENT:');
    expect(loadConfig({}).PURGE_BUSY_PERCENT).to.equal(25);
    expect(loadConfig({ PURGE_BUSY_PERCENT: '100' }).PURGE_BUSY_PERCENT).to.equal(100);
  });

  it('when EXPORT_BUSY_PERCENT is outside 1–100, then start is refused naming it; unset, an export is paced at 50%', () => {
    expect(refusal({ EXPORT_BUSY_PERCENT: '0' })).to.include('EXPORT_BUSY_PERCENT:');
    expect(refusal({ EXPORT_BUSY_PERCENT: '101' })).to.include('EXPORT_BUSY_PERCENT:');
    expect(refusal({ EXPORT_BUSY_PERCENT: '50%' })).to.include('EXPORT_BUSY_PERCENT:');
    expect(loadConfig({}).EXPORT_BUSY_PERCENT).to.equal(50);
    expect(loadConfig({ EXPORT_BUSY_PERCENT: '100' }).EXPORT_BUSY_PERCENT).to.equal(100);
  });

  it('when IDEMPOTENCY_TOMBSTONE_DAYS is not an integer in 1–3650, then start is refused naming it; unset, 30', () => {
    for (const bad of ['0', '3651', '1.5', 'month']) {
      expect(refusal({ IDEMPOTENCY_TOMBSTONE_DAYS: bad })).to.include('IDEMPOTENCY_TOMBSTONE_DAYS:');
    }
    expect(loadConfig({}).IDEMPOTENCY_TOMBSTONE_DAYS).to.equal(30);
    expect(loadConfig({ IDEMPOTENCY_TOMBSTONE_DAYS: '1' }).IDEMPOTENCY_TOMBSTONE_DAYS).to.equal(1);
  });

  it('when EXPORT_MAX_ROWS or EXPORT_TTL_HOURS is invalid, then start is refused naming it; unset, 1000000 and 24', () => {
    for (const bad of ['0', '-1', '1.5', 'many', '100000001']) {
      expect(refusal({ EXPORT_MAX_ROWS: bad })).to.include('EXPORT_MAX_ROWS:');
    }
    for (const bad of ['0', '-2', 'day', '8761']) {
      expect(refusal({ EXPORT_TTL_HOURS: bad })).to.include('EXPORT_TTL_HOURS:');
    }
    const defaults = loadConfig({});
    expect(defaults.EXPORT_MAX_ROWS).to.equal(1000000);
    expect(defaults.EXPORT_TTL_HOURS).to.equal(24);
    const set = loadConfig({ EXPORT_MAX_ROWS: '10', EXPORT_TTL_HOURS: '0.001' });
    expect(set.EXPORT_MAX_ROWS).to.equal(10);
    expect(set.EXPORT_TTL_HOURS).to.equal(0.001);
  });

  it('when a previous response key is not 32 bytes, then start is refused naming RESPONSE_ENCRYPTION_PREVIOUS_KEYS', () => {
    expect(refusal({ RESPONSE_ENCRYPTION_PREVIOUS_KEYS: `k0:${key30}` })).to.include(
      'RESPONSE_ENCRYPTION_PREVIOUS_KEYS:',
    );
    expect(
      loadConfig({ RESPONSE_ENCRYPTION_PREVIOUS_KEYS: `k0:${key32}` }).RESPONSE_ENCRYPTION_PREVIOUS_KEYS,
    ).to.equal(`k0:${key32}`);
  });

  it('when FAILPOINTS or FAILPOINTS_CONTROL=1 comes with NODE_ENV=production, then start is refused naming each variable (the rest of the production configuration being valid)', () => {
    const production = {
      NODE_ENV: 'production',
      JWT_SECRET: 'a-production-secret-0123456789',
      IDEMPOTENCY_HMAC_KEY: 'a-production-hmac-key-012345',
      RESPONSE_ENCRYPTION_KEY: key32,
      PAYMENT_GATEWAY_URL: 'https://gateway.example',
    };
    expect(() => loadConfig(production), 'the same configuration without failpoints').to.not.throw();
    expect(refusal({ ...production, FAILPOINTS: 'payment.charge.before=throw' })).to.match(
      /^Invalid configuration: FAILPOINTS: never allowed with NODE_ENV=production$/,
    );
    expect(refusal({ ...production, FAILPOINTS_CONTROL: '1' })).to.match(
      /^Invalid configuration: FAILPOINTS_CONTROL: never allowed with NODE_ENV=production$/,
    );
    const both = refusal({ ...production, FAILPOINTS: 'purge.batch=throw', FAILPOINTS_CONTROL: '1' });
    expect(both).to.include('FAILPOINTS: never').and.include('FAILPOINTS_CONTROL: never');
    // 0 is the default spelled out: nothing is mounted, so nothing is refused.
    expect(loadConfig({ ...production, FAILPOINTS_CONTROL: '0' }).FAILPOINTS_CONTROL).to.equal('0');
  });

  it('when FAILPOINTS names an unknown failpoint or action outside production, then start is refused naming it', () => {
    expect(refusal({ FAILPOINTS: 'local.nowhere=throw' })).to.include('unknown failpoint "local.nowhere"');
    expect(refusal({ FAILPOINTS: 'local.before-claim=explode' })).to.include('unknown action "explode"');
    expect(loadConfig({ FAILPOINTS: 'local.before-claim=throw@1' }).FAILPOINTS).to.equal(
      'local.before-claim=throw@1',
    );
  });

  it('when the server process starts with an invalid configuration, then it exits 1 with one line naming every variable', async () => {
    const { code, stderr } = await startFails({ NODE_ENV: 'production' });
    expect(code).to.equal(1);
    expect(stderr.trim().split('\n')).to.have.length(1);
    expect(stderr).to.include('JWT_SECRET:').and.include('RESPONSE_ENCRYPTION_KEY:');
  });

  it('when the server process cannot listen on HOST, then it exits 1 with a line naming HOST and PORT', async function () {
    this.timeout(60000);
    // 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine: EADDRNOTAVAIL, with no DNS.
    const { code, stderr } = await startFails({
      DATABASE_URL: String(process.env.TEST_DATABASE_URL),
      HOST: '192.0.2.1',
      PORT: '0',
    });
    expect(code).to.equal(1);
    expect(stderr).to.match(/cannot listen on HOST=192\.0\.2\.1 PORT=0: EADDRNOTAVAIL/);
  });
});
