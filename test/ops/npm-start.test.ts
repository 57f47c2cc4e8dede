// The README's own start command, as a user runs it: `npm start` builds (tsc, dist/) and then execs
// node on the built server with the heap limit of package.json's start script. Every other test
// starts server/main.ts through tsx; this one checks that what users run is the same service.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { TEST_ENV } from '../support/server.js';
import { stablePort } from '../support/stable-port.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/** The pids of a process's children (ps), to find the node that the start script exec'd. */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((n) => n > 0);
  } catch {
    return [];
  }
}

describe('npm start: the built server, as the README starts it', function () {
  // The first build of a fresh clone compiles every production file (about 15 s on 2 cores).
  this.timeout(180000);
  let db: IsolatedDatabase;
  let npm: ChildProcess | undefined;
  let output = '';

  before(async () => {
    db = await createIsolatedDatabase('npmstart');
  });
  after(async () => {
    // Its own process group (detached): npm, the shell and node go together, whatever happened.
    if (npm?.pid && npm.exitCode === null && npm.signalCode === null) {
      try {
        process.kill(-npm.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await db?.drop();
  });

  it('when npm start runs, then it builds, serves the contract from dist/ with the heap limit, and SIGTERM to npm stops the server gracefully with exit 0', async () => {
    const port = await stablePort();
    npm = spawn('npm', ['start'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        ...TEST_ENV,
        LOG_LEVEL: 'warn',
        DATABASE_URL: db.url,
        PORT: String(port),
        HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    npm.stdout?.on('data', (d: Buffer) => {
      output += d.toString();
    });
    npm.stderr?.on('data', (d: Buffer) => {
      output += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => npm?.once('exit', (code) => resolve(code)));
    const url = `http://127.0.0.1:${port}`;
    let ready = false;
    for (let i = 0; i < 600 && !ready && npm.exitCode === null; i++) {
      ready = await fetch(`${url}/readyz`)
        .then((r) => r.ok)
        .catch(() => false);
      if (!ready) await sleep(250);
    }
    expect(ready, `npm start never became ready:\n${output}`).to.equal(true);

    // The process serving is node on the built entry, with the start script's flags (the shell
    // exec'd it, so it is npm's child; no tsx loader in it).
    const nodePid = childrenOf(npm.pid!).find((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('dist/server/main.js'),
    );
    expect(nodePid, 'a child of npm running dist/server/main.js').to.be.a('number');
    const args = readFileSync(`/proc/${nodePid}/cmdline`, 'utf8').split('\0');
    const script = JSON.parse(readFileSync('package.json', 'utf8')).scripts.start as string;
    const limit = /--max-old-space-size=\d+/.exec(script)?.[0];
    expect(limit, 'the start script sets a heap limit').to.be.a('string');
    expect(args).to.include(limit);
    expect(args.join(' ')).to.not.include('tsx');

    // The contract, from the built code: a keyed create, then its replay.
    const auth = bearer(uniqueTenant('npmstart'), '1');
    const key = idempotencyKey();
    const body = { merchantOrderNo: 'mo-built', amount: '7.00' };
    const send = () =>
      http('POST', '/api/v1/orders', { baseUrl: url, headers: { ...auth, 'Idempotency-Key': key }, body });
    const first = await send();
    expect(first.status, first.text).to.equal(201);
    const again = await send();
    expect(again.status, again.text).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body.data.id).to.equal(first.body.data.id);

    // Signals sent to npm reach the server: graceful stop, exit 0 through npm.
    process.kill(npm.pid!, 'SIGTERM');
    expect(await exited, output).to.equal(0);
    const gone = await fetch(`${url}/healthz`).then(
      () => false,
      () => true,
    );
    expect(gone, 'the server stopped with npm').to.equal(true);
  });
});
