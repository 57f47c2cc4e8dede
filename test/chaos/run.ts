/**
 * `npm run chaos -- [--seed S] [--minutes M] [--seeds N]`: randomized fault schedules against 3 real
 * instances, checked against the protocol model (test/chaos/checker.ts). The same seed draws the same
 * fault schedule (test/chaos/schedule.ts; printed as drawn before each seed runs); the clients'
 * traffic follows the answers and the timing and is not reproduced. Uses DATABASE_URL's server (a scratch database per seed, dropped after) or an embedded
 * PostgreSQL. Exit 0: no violation; 1: a violation (the seed, the invariant and the history slice are
 * printed); 2: usage.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { startEmbeddedPostgres } from '../../core/embedded-postgres.js';
import { FAILPOINT_NAMES } from '../../core/failpoints.js';
import { readCliArgs } from '../../server/cli-args.js';
import { stablePort } from '../support/stable-port.js';
import { INVARIANTS } from './checker.js';
import { type ChaosReport, runChaos } from './driver.js';
import { describeFault, drawSchedule } from './schedule.js';
import { scratchDatabase } from './scratch-database.js';

const args = readCliArgs(
  {
    seed: { type: 'string' },
    minutes: { type: 'string' },
    seeds: { type: 'string' },
    quiet: { type: 'boolean' },
  },
  z.object({
    seed: z.coerce.number().int().min(0).optional(),
    minutes: z.coerce
      .number()
      .positive()
      .max(24 * 60)
      .default(1),
    seeds: z.coerce.number().int().min(1).max(10000).optional(),
    quiet: z.boolean().default(false),
  }),
);
if (!args.ok) {
  console.error(`${args.problem}\nusage: npm run chaos -- [--seed S] [--minutes M] [--seeds N]`);
  process.exit(2);
}
const { minutes, quiet } = args.values;
const firstSeed = args.values.seed ?? randomBytes(4).readUInt32BE() % 1000000;
const budgetMs = minutes * 60000;
// One schedule is at most 60 s of faults; several seeds fill the minutes asked for.
const perSeedMs = Math.min(60000, budgetMs);
const seeds = args.values.seeds ?? 0;

// Without DATABASE_URL the run owns its PostgreSQL (embedded, on a data folder of its own), so the
// schedule may also restart it; a server given by DATABASE_URL is never restarted.
const dataDir = process.env.DATABASE_URL ? undefined : await mkdtemp(path.join(os.tmpdir(), 'chaos-pg-'));
const port = await stablePort();
let embedded = dataDir ? await startEmbeddedPostgres({ dir: path.join(dataDir, 'data'), port }) : undefined;
const restartDatabase = dataDir
  ? async () => {
      await embedded?.stop();
      embedded = await startEmbeddedPostgres({ dir: path.join(dataDir, 'data'), port });
    }
  : undefined;
const server = process.env.DATABASE_URL ?? embedded?.url ?? '';
const totals = {
  requests: 0,
  faults: {} as Record<string, number>,
  fired: {} as Record<string, number>,
  checked: {} as Record<string, number>,
  violations: 0,
};
const started = Date.now();
let failed: ChaosReport | undefined;
let ran = 0;
try {
  // --seeds N runs exactly N seeds; otherwise seeds run until the minutes asked for are used.
  for (
    let i = 0;
    (args.values.seeds ? i < seeds : i === 0 || Date.now() - started < budgetMs) && !failed;
    i++
  ) {
    const seed = firstSeed + i;
    ran += 1;
    const db = await scratchDatabase(server, `chaos_${seed}`);
    try {
      console.log(`seed ${seed}: ${perSeedMs / 1000} s of faults`);
      if (!quiet)
        for (const line of drawSchedule(seed, perSeedMs, { instances: 3 }).map(describeFault))
          console.log(`  drawn: ${line}`);
      const report = await runChaos({
        seed,
        durationMs: perSeedMs,
        databaseUrl: db.url,
        restartDatabase,
        log: quiet ? undefined : (line) => console.log(`  ${line}`),
      });
      totals.requests += report.requests;
      for (const [k, n] of Object.entries(report.faults)) totals.faults[k] = (totals.faults[k] ?? 0) + n;
      for (const [k, n] of Object.entries(report.fired)) totals.fired[k] = (totals.fired[k] ?? 0) + n;
      for (const [k, n] of Object.entries(report.result.checked))
        totals.checked[k] = (totals.checked[k] ?? 0) + n;
      totals.violations += report.result.violations.length;
      console.log(
        `seed ${seed}: ${report.requests} requests, answers ${JSON.stringify(report.answers)}, faults ${JSON.stringify(report.faults)}, failpoints fired ${JSON.stringify(report.fired)}${report.reconcile ? `, reconcile --repair ${report.reconcile}` : ''}, violations ${report.result.violations.length}`,
      );
      if (report.result.violations.length > 0) failed = report;
    } finally {
      await db.drop();
    }
  }
} finally {
  await embedded?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}
console.log(`\n${ran} seed(s) from ${firstSeed}, ${((Date.now() - started) / 60000).toFixed(1)} min`);
console.log(`requests: ${totals.requests}`);
console.log(`faults injected: ${JSON.stringify(totals.faults)}`);
console.log(`failpoints fired: ${JSON.stringify(totals.fired)}`);
const never = FAILPOINT_NAMES.filter((name) => !totals.fired[name]);
console.log(`failpoints that never fired: ${never.length > 0 ? never.join(', ') : 'none'}`);
console.log('invariants checked:');
for (const [name, text] of Object.entries(INVARIANTS))
  console.log(`  ${name} (${totals.checked[name] ?? 0}×): ${text}`);
console.log(`violations: ${totals.violations}`);
if (failed) {
  const first = failed.result.violations[0];
  console.log(`\nFIRST VIOLATION (seed ${failed.seed}): ${first.message}`);
  console.log(`schedule as drawn: ${failed.schedule.join('; ')}`);
  console.log('history slice:');
  for (const e of first.slice) console.log(`  ${JSON.stringify(e)}`);
  process.exit(1);
}
