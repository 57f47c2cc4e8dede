import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import { insertOrders, startExport, untilFinal } from './support.js';

const ROWS = 1_000_000;
const LIMIT_MB = 200;
const USER = '930000001';

/** A process's resident set now and its peak so far (VmRSS, VmHWM), in MB (Linux /proc). */
function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

/**
 * What `npm start` runs after its build: node, its flags and dist/server/main.js (package.json),
 * read from there. The measured process is the one users run, without the test's TypeScript loader
 * (tsx's transformed sources and source maps live in the process it loads into: 15-30 MB of RSS).
 */
function startCommand(): string[] {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } };
  const run = /exec node (.*)$/.exec(pkg.scripts.start)?.[1]?.split(/\s+/);
  if (!run?.some((a) => a.startsWith('--max-old-space-size=')) || run.at(-1) !== 'dist/server/main.js')
    throw new Error(
      'npm start no longer execs node --max-old-space-size=... dist/server/main.js: mirror it here',
    );
  return run;
}

describe('exports: memory stays bounded for a 1,000,000-row export (written and downloaded)', function () {
  this.timeout(600_000);
  let db: IsolatedDatabase;
  let instance: Instance | undefined;

  before(async function () {
    try {
      readFileSync('/proc/self/status');
    } catch {
      console.log('      skipped: no /proc/<pid>/status on this system (the peak RSS is read from it)');
      this.skip();
    }
    db = await createIsolatedDatabase('exportsmem');
    // npm start's own build (tsc into dist/), as the README's start command does first.
    execFileSync('npm', ['run', 'build'], { stdio: 'ignore', timeout: 180_000 });
  });
  after(async () => {
    instance?.kill();
    await instance?.exited;
    await db?.drop();
  });

  it('when 1,000,000 orders are exported as CSV and the file downloaded, then the instance’s peak RSS stays under 200 MB and the file has every row', async () => {
    // The process `npm start` runs (dist/, its heap flag), not the tests' tsx loader.
    instance = await startInstance({ DATABASE_URL: db.url }, startCommand());
    const { pid, url } = instance;
    const tenant = uniqueTenant('mem-exp');
    await insertOrders(db.sequelize, { tenant, userId: USER, count: ROWS, prefix: 'm' });
    const auth = bearer(tenant, USER);
    const before = memoryOf(pid);

    const started = await startExport(auth, { resource: 'orders' }, { baseUrl: url });
    expect(started.status, started.text).to.equal(202);
    const id: string = started.body.data.resourceId;
    let sampled = 0;
    const sampling = (async () => {
      while (instance?.child.exitCode === null && sampled >= 0) {
        sampled = Math.max(sampled, memoryOf(pid).rssMb);
        await sleep(100);
      }
    })();
    const final = await untilFinal(auth, id, { baseUrl: url, withinMs: 540_000 });
    expect(final).to.deep.include({ status: 'SUCCEEDED', rowCount: ROWS });
    const afterExport = memoryOf(pid);
    const highestExporting = sampled;

    // Downloaded as a stream: the test counts bytes and lines, it never holds the file either.
    const res = await fetch(`${url}/api/v1/exports/${id}/file`, { headers: auth });
    expect(res.status).to.equal(200);
    let bytes = 0;
    let lines = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.length;
      for (const b of chunk) if (b === 0x0a) lines++;
    }
    const afterDownload = memoryOf(pid);
    const highest = Math.max(sampled, afterDownload.rssMb);
    sampled = -1;
    await sampling;
    expect(bytes).to.equal(final.bytes);
    expect(lines).to.equal(ROWS + 1); // the header line, then one line per row (no line breaks in the data)

    const seconds = (Date.parse(final.completedAt) - Date.parse(final.createdAt)) / 1000;
    console.log(
      `      figures (one run, shared machine): ${ROWS} rows, ${(bytes / 1e6).toFixed(1)} MB in ${seconds.toFixed(1)} s` +
        ` = ${Math.round(ROWS / seconds)} rows/s; RSS before ${before.rssMb.toFixed(0)} MB,` +
        ` after the export ${afterExport.rssMb.toFixed(0)} MB (peak ${afterExport.peakMb.toFixed(0)} MB, highest sampled while exporting ${highestExporting.toFixed(0)} MB),` +
        ` highest sampled ${highest.toFixed(0)} MB,` +
        ` peak (VmHWM) ${afterDownload.peakMb.toFixed(0)} MB`,
    );
    expect(afterDownload.peakMb).to.be.below(LIMIT_MB);
  });
});
