/**
 * The keyed create's SQL of two commits, A/B under pgbench, without the service: what differs is the
 * database's work alone (docs/BENCHMARKS.md, "Against the commit before issue 26").
 *
 *   node --import tsx bench/sql-ab.ts --a=<url> --a-result=<file.json> --b=<url> --b-result=<file.json>
 *     [--records=1000000] [--pairs=10] [--seconds=6] [--clients=1]
 *
 * Each side is an empty database migrated by its own commit (`DATABASE_URL=<url> npm run db:migrate`
 * in that commit's worktree) and the script its own `npm run bench -- --only=pgbench --quick`
 * captured (`results.pgbench.scripts.idempotent` of its result file). Both databases are filled alike
 * (the growth scenario's records of other users, measure.ts `fillRecords`), then the two scripts run
 * in alternate rounds (A B, B A, ...): both databases grow alike and the machine's drift falls on
 * both. Prints each pair's tps and B ÷ A, and their median and mean. Databases that grew apart compare
 * badly: B's with 17 times A's users and 1.6 times its records ran 0.93 of A, 0.97 when grown alike.
 *
 * Where the time goes: run the scripts with PGOPTIONS="-c session_preload_libraries=auto_explain
 * -c auto_explain.log_min_duration=0 -c auto_explain.log_analyze=on
 * -c auto_explain.log_nested_statements=on" and sum the nested statements' durations in the log.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { fillDatabase } from './measure.js';
import { runPgbench } from './pgbench.js';
import { median } from './report.js';

const { values: opts } = parseArgs({
  options: {
    a: { type: 'string' },
    'a-result': { type: 'string' },
    b: { type: 'string' },
    'b-result': { type: 'string' },
    records: { type: 'string', default: '1000000' },
    pairs: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '6' },
    clients: { type: 'string', default: '1' },
  },
});

function count(name: keyof typeof opts, min: number): number {
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < min) {
    console.error(`--${name} must be an integer of at least ${min}`);
    process.exit(2);
  }
  return n;
}

interface Side {
  name: 'A' | 'B';
  url: string;
  script: string;
}

async function side(name: 'A' | 'B', url: string | undefined, resultFile: string | undefined): Promise<Side> {
  if (!url || !resultFile) {
    console.error(`--${name.toLowerCase()} and --${name.toLowerCase()}-result are required`);
    process.exit(2);
  }
  let script: string | undefined;
  try {
    const result = JSON.parse(await readFile(resultFile, 'utf8')) as {
      results?: { pgbench?: { scripts?: { idempotent?: string } } };
    };
    script = result.results?.pgbench?.scripts?.idempotent;
  } catch (err) {
    console.error(`${resultFile}: ${(err as Error).message}`);
    process.exit(2);
  }
  if (!script) {
    console.error(`${resultFile}: no results.pgbench.scripts.idempotent (run the bench with --only=pgbench)`);
    process.exit(2);
  }
  return { name, url, script };
}

const records = count('records', 0);
const pairs = count('pairs', 1);
const seconds = count('seconds', 1);
const clients = count('clients', 1);
const a = await side('A', opts.a, opts['a-result']);
const b = await side('B', opts.b, opts['b-result']);

for (const s of [a, b]) {
  const t = Date.now();
  await fillDatabase(s.url, records);
  console.log(`${s.name}: ${records} records filled in ${((Date.now() - t) / 1000).toFixed(1)} s`);
}
const tps = async (s: Side, secs: number) =>
  (await runPgbench({ url: s.url, script: s.script, name: `sql-ab-${s.name}`, clients, seconds: secs })).tps;
// One untimed round each: every connection's plans, the pages the script touches.
for (const s of [a, b]) await tps(s, 2);
const ratios: number[] = [];
for (let i = 1; i <= pairs; i++) {
  const round: Record<string, number> = {};
  for (const s of i % 2 ? [a, b] : [b, a]) round[s.name] = await tps(s, seconds);
  ratios.push(round.B / round.A);
  console.log(
    `pair ${i}: A ${round.A.toFixed(0)} tps, B ${round.B.toFixed(0)} tps, B ÷ A ${(round.B / round.A).toFixed(3)}`,
  );
}
const mean = ratios.reduce((x, y) => x + y, 0) / ratios.length;
console.log(
  `B ÷ A over ${pairs} pairs: median ${(median(ratios) ?? Number.NaN).toFixed(3)}, mean ${mean.toFixed(3)}`,
);
