import { spawn } from 'node:child_process';
import { expect } from 'chai';
import { QueryTypes, type Sequelize } from 'sequelize';
import { http } from './http.js';
import { TEST_ENV } from './server.js';
import { bearer, idempotencyKey, uniqueTenant } from './tokens.js';
import { OPERATOR_ID } from './users.js';

/** Every function of the database by signature (what a caller's argument list resolves to). */
export async function functionSignatures(sequelize: Sequelize): Promise<string[]> {
  const rows = await sequelize.query<{ sig: string }>(
    `SELECT p.oid::regprocedure::text AS sig FROM pg_proc p
       JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema() ORDER BY 1`,
    { type: QueryTypes.SELECT },
  );
  return rows.map((r) => r.sig);
}

export async function recordedMigrations(sequelize: Sequelize): Promise<string[]> {
  const [{ present }] = await sequelize.query<{ present: boolean }>(
    `SELECT to_regclass('"SequelizeMeta"') IS NOT NULL AS present`,
    { type: QueryTypes.SELECT },
  );
  if (!present) return [];
  const rows = await sequelize.query<{ name: string }>('SELECT name FROM "SequelizeMeta" ORDER BY name', {
    type: QueryTypes.SELECT,
  });
  return rows.map((r) => r.name);
}

/** `npm run db:migrate` as a real child process on `databaseUrl`; resolves with how it ended. */
export async function runMigrateCli(
  databaseUrl: string,
  env: Record<string, string> = {},
): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/migrate-cli.ts'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      ...TEST_ENV,
      DATABASE_URL: databaseUrl,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => {
    output += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    output += d.toString();
  });
  const timer = setTimeout(() => child.pid && process.kill(child.pid, 'SIGKILL'), 60000);
  return new Promise((resolve) =>
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    }),
  );
}

/** The service on `baseUrl` answers the calls whose statements the migrations define. */
export async function expectServiceAnswers(baseUrl: string): Promise<void> {
  const tenant = uniqueTenant('mig');
  const admin = bearer(tenant, OPERATOR_ID, 'admin');
  const keyed = await http('POST', '/api/v1/users', {
    baseUrl,
    headers: { ...admin, 'Idempotency-Key': idempotencyKey() },
    body: { name: 'Keyed', age: 30, username: 'keyed' },
  });
  expect(keyed.status, keyed.text).to.equal(201);
  const keyless = await http('POST', '/api/v1/users', {
    baseUrl,
    headers: admin,
    body: { name: 'Plain', age: 31 },
  });
  expect(keyless.status, keyless.text).to.equal(201);
  const read = await http('GET', `/api/v1/users/${keyed.body.data.id}`, { baseUrl, headers: admin });
  expect(read.status, read.text).to.equal(200);
  const order = { merchantOrderNo: 'M-1', amount: '10.50' };
  const created = await http('POST', '/api/v1/orders', {
    baseUrl,
    headers: { ...admin, 'Idempotency-Key': idempotencyKey() },
    body: order,
  });
  expect(created.status, created.text).to.equal(201);
  const paid = await http('POST', '/api/v1/payments', {
    baseUrl,
    headers: { ...admin, 'Idempotency-Key': idempotencyKey() },
    body: order,
  });
  expect(paid.status, paid.text).to.equal(201);
}
