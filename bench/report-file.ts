import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type BenchRun, stamp } from './bench-run.js';
import { renderTable } from './report.js';
import type { Counted } from './scenarios/round-trips.js';
import { ROOT } from './settings.js';

export const loadText = (l: unknown) =>
  Array.isArray(l) ? (l as number[]).map((v) => v.toFixed(2)).join(' ') : '?';

export async function report(ctx: BenchRun): Promise<void> {
  const {
    P,
    ROUNDS,
    SEGMENT,
    CONNECTIONS,
    QUICK,
    PROFILE,
    PURGE_BUSY_PERCENT,
    SERVER_ENV,
    ONLY,
    GIT,
    t0,
    log,
    results,
    rows,
    cpuTable,
  } = ctx;
  const table = renderTable(rows);
  const rt = results.roundTrips as Record<string, Counted> | undefined;
  const lines = [
    '',
    `Idempotency benchmark — ${QUICK ? 'quick' : 'full'} run, ${CONNECTIONS} connections, ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim()}), Node ${process.version}, PostgreSQL ${ctx.db.version} (${ctx.db.origin}, ${ctx.db.transport})`,
    `commit ${GIT.commit ?? '?'}${GIT.dirty?.length ? ` + uncommitted changes in ${GIT.dirty.length} service file(s)` : ''}; load average ${loadText(results.loadAverageAtStart)} at start, ${loadText(results.loadAverageAtEnd)} at end`,
    '',
    table,
    '',
  ];
  if (cpuTable.length > 0) {
    lines.push('CPU time per final answer (ms; pgbench: per transaction), by process:');
    lines.push(
      `  ${'scenario'.padEnd(20)} ${'service'.padStart(8)} ${'postgres'.padStart(9)} ${'load gen'.padStart(9)} ${'gateway'.padStart(8)}`,
    );
    const f = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : '–');
    for (const c of cpuTable) {
      lines.push(
        `  ${c.name.padEnd(20)} ${f(c.service).padStart(8)} ${f(c.postgres).padStart(9)} ${f(c.loadGenerator).padStart(9)} ${f(c.gateway).padStart(8)}`,
      );
    }
    lines.push('');
  }
  if (rt) {
    lines.push(
      'Database round trips per request (pg query calls in the service; statements from pg_stat_statements):',
    );
    for (const [name, c] of Object.entries(rt)) {
      lines.push(
        `  ${name.padEnd(17)} ${c.roundTrips.toFixed(2)} round trips${c.statements !== undefined ? `, ${c.statements.toFixed(2)} statements` : ''}`,
      );
      for (const t of c.texts) lines.push(`      ${t.perRequest.toFixed(2)} × ${t.sql}`);
    }
    lines.push('');
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  const file = path.join(ROOT, 'bench', 'results', `${stamp()}${QUICK ? '-quick' : ''}.json`);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(
    file,
    `${JSON.stringify(
      {
        meta: {
          date: new Date().toISOString(),
          mode: QUICK ? 'quick' : 'full',
          only: ONLY ?? null,
          experiments: {
            serverEnv: SERVER_ENV,
            purgeBusyPercent: PURGE_BUSY_PERCENT ?? null,
            profiled: PROFILE,
          },
          connections: CONNECTIONS,
          durations: { rounds: ROUNDS, segment: SEGMENT, short: P.short, warmup: P.warmup },
          cpus: os.cpus().length,
          cpuModel: os.cpus()[0]?.model,
          memoryGb: Math.round(os.totalmem() / 2 ** 30),
          node: process.version,
          postgres: ctx.db.version,
          database: ctx.db.origin,
          databaseTransport: ctx.db.transport,
          pgStatStatements: ctx.db.statements,
          elapsedSec: (Date.now() - t0) / 1000,
          git: GIT,
          loadAverage: { start: results.loadAverageAtStart, end: results.loadAverageAtEnd },
        },
        rows,
        cpuMsPerRequest: cpuTable,
        results,
      },
      null,
      2,
    )}\n`,
  );
  log(`results written to ${path.relative(ROOT, file)} (${((Date.now() - t0) / 1000).toFixed(0)}s in all)`);
}
