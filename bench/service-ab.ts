/**
 * Two commits' services A/B at one table size, side by side: the growth scenario's keyed create and
 * its plain-create control measured at the service, without run-to-run drift (docs/BENCHMARKS.md,
 * "Against the commit before issue 26").
 *
 *   node --import tsx bench/service-ab.ts --a-dir=<checkout> --a=<url> --b-dir=<checkout> --b=<url>
 *     [--records=1000000] [--rounds=8] [--seconds=5] [--connections=16]
 *
 * Each side is a checkout built with `npm run build` and an empty database migrated by it
 * (`DATABASE_URL=<url> npm run db:migrate` there). Both databases are filled alike (measure.ts
 * `fillDatabase`), both services run at once (the bench's settings and secrets, the start script's
 * node flags), and segments of keyed and plain creates alternate between them, each round in another
 * order: the machine's drift falls on both. Prints per round B ÷ A of keyed ÷ plain, and the medians
 * of req/s and of CPU per answer (the service's own; PostgreSQL's whole server, which only the side
 * under load uses, when this runs as a user who can read the server's postmaster.pid).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { stablePort } from '../test/support/stable-port.js';
import { BenchRun } from './bench-run.js';
import { type LoadRequest, load } from './load.js';
import { fillDatabase } from './measure.js';
import { postmasterPid } from './postgres.js';
import { type Child, cpuOf, postgresCpuOf, startNode } from './processes.js';
import { median } from './report.js';
import { parseOptions } from './settings.js';
import { serviceEnv, startCommand } from './start-command.js';

const { values: opts } = parseArgs({
  options: {
    'a-dir': { type: 'string' },
    a: { type: 'string' },
    'b-dir': { type: 'string' },
    b: { type: 'string' },
    records: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '16' },
  },
});

function fail(line: string): never {
  console.error(line);
  process.exit(2);
}

function count(name: 'records' | 'rounds' | 'seconds' | 'connections', min: number): number {
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < min) fail(`--${name} must be an integer of at least ${min}`);
  return n;
}

interface Side {
  name: 'A' | 'B';
  dir: string;
  url: string;
  service?: Child;
}

function side(name: 'A' | 'B', dir: string | undefined, url: string | undefined): Side {
  const flag = name.toLowerCase();
  if (!dir || !url) fail(`--${flag}-dir and --${flag} are required`);
  return { name, dir: path.resolve(dir), url };
}

/** The PostgreSQL server's postmaster pid, when its data directory is readable here. */
async function postmasterOf(url: string): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ dir: string }>("SELECT current_setting('data_directory') AS dir");
    return postmasterPid(rows[0].dir);
  } finally {
    await client.end();
  }
}

const records = count('records', 0);
const rounds = count('rounds', 1);
const seconds = count('seconds', 1);
const connections = count('connections', 1);
const sides = [side('A', opts['a-dir'], opts.a), side('B', opts['b-dir'], opts.b)];
const options = parseOptions([]);
if ('problem' in options) fail(options.problem);
const requests = new BenchRun(options);
const postmaster = await postmasterOf(sides[0].url);
const pgCpu = () => (postmaster ? postgresCpuOf(postmaster) : Number.NaN);

try {
  for (const s of sides) {
    const t = Date.now();
    await fillDatabase(s.url, records);
    console.log(`${s.name}: ${records} records filled in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
  for (const s of sides) {
    const start = startCommand(s.dir);
    const port = await stablePort();
    s.service = await startNode({
      name: `service-${s.name}`,
      args: [...start.flags, path.join(s.dir, start.entry)],
      env: serviceEnv({ databaseUrl: s.url, gatewayUrl: 'http://127.0.0.1:9', port }),
      port,
      readyPath: '/readyz',
    });
  }
  const kinds: Record<'keyed' | 'plain', () => LoadRequest> = {
    keyed: requests.idemUser,
    plain: requests.plainUser,
  };
  const segments = sides.flatMap((s) => (['keyed', 'plain'] as const).map((kind) => ({ s, kind })));
  const run = async (s: Side, kind: 'keyed' | 'plain', secs: number) => {
    const service = s.service as Child;
    const before = { service: cpuOf(service.pid), pg: pgCpu() };
    const r = await load({ url: service.url, connections, duration: secs, next: kinds[kind] });
    const answers = r.created || Number.NaN;
    return {
      rps: r.rps,
      serviceMs: (cpuOf(service.pid) - before.service) / answers,
      pgMs: (pgCpu() - before.pg) / answers,
    };
  };
  // Untimed: each process's first use of every path, each connection's plans.
  for (const { s, kind } of segments) await run(s, kind, 3);
  type Result = Awaited<ReturnType<typeof run>>;
  const all: Record<string, Result[]> = {};
  const ratios: number[] = [];
  // CPU per keyed answer (service and PostgreSQL), B ÷ A within each round: paired, so steadier.
  const cpuRatios: number[] = [];
  const cpuOfAnswer = (r: Result) => r.serviceMs + r.pgMs;
  for (let round = 0; round < rounds; round++) {
    const got: Record<string, Result> = {};
    for (let i = 0; i < segments.length; i++) {
      const { s, kind } = segments[(i + round) % segments.length];
      const name = `${s.name} ${kind}`;
      got[name] = await run(s, kind, seconds);
      all[name] = [...(all[name] ?? []), got[name]];
    }
    const value = (n: 'A' | 'B') => got[`${n} keyed`].rps / got[`${n} plain`].rps;
    ratios.push(value('B') / value('A'));
    cpuRatios.push(cpuOfAnswer(got['B keyed']) / cpuOfAnswer(got['A keyed']));
    console.log(
      `round ${round + 1}: ${Object.entries(got)
        .map(([n, r]) => `${n} ${r.rps.toFixed(0)}`)
        .join(
          ', ',
        )} req/s; keyed ÷ plain A ${value('A').toFixed(3)}, B ${value('B').toFixed(3)}, B ÷ A ${(value('B') / value('A')).toFixed(3)}`,
    );
  }
  const med = (name: string, k: keyof Result) => median(all[name].map((r) => r[k])) ?? Number.NaN;
  for (const name of Object.keys(all).sort())
    console.log(
      `${name}: median ${med(name, 'rps').toFixed(0)} req/s, CPU ms per answer service ${med(name, 'serviceMs').toFixed(3)}, PostgreSQL ${med(name, 'pgMs').toFixed(3)}`,
    );
  const mean = ratios.reduce((x, y) => x + y, 0) / ratios.length;
  console.log(
    `keyed ÷ plain, B ÷ A over ${rounds} rounds at ${records} records: median ${(median(ratios) ?? Number.NaN).toFixed(3)}, mean ${mean.toFixed(3)}; CPU per keyed answer B ÷ A: median ${(median(cpuRatios) ?? Number.NaN).toFixed(3)}`,
  );
} finally {
  for (const s of sides) await s.service?.stop();
}
