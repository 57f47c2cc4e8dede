import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEPLOY_CONF, findNginx, renderNginxConf } from './nginx-conf.js';

export { findNginx };

// deploy/ imports no service code (.dependency-cruiser.cjs), so not core/'s freePort: the same three calls.
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface Nginx {
  url: string;
  port: number;
  pid: number;
  dir: string;
  /** Lines of nginx's access log (JSON, deploy/nginx.conf's `upstream_json` format). */
  accessLog(): Promise<Array<Record<string, unknown>>>;
  /** SIGTERM to the master (it stops its workers), SIGKILL if it hangs; then removes the temp dir. */
  stop(): Promise<void>;
}

/**
 * Starts nginx (not daemonised, a child of this process) with deploy/nginx.conf in front of `upstreams`.
 * Here rather than in test/ because the scale probe (bench/) runs the same balancer as the tests.
 */
export async function startNginx(upstreams: string[], binary = findNginx()): Promise<Nginx> {
  if (!binary) throw new Error('nginx is not installed');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'idem-nginx-'));
  const port = await freePort();
  const conf = renderNginxConf(await readFile(DEPLOY_CONF, 'utf8'), { listenPort: port, upstreams, dir });
  const confPath = path.join(dir, 'nginx.conf');
  await writeFile(confPath, conf);
  const errorLog = path.join(dir, 'error.log');
  const child: ChildProcess = spawn(
    binary,
    ['-p', dir, '-c', confPath, '-g', `daemon off; pid ${dir}/nginx.pid; error_log ${errorLog} warn;`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pid = child.pid ?? -1;
  const running = () => child.exitCode === null && child.signalCode === null;
  const errors = async () =>
    `${out}${existsSync(errorLog) ? await readFile(errorLog, 'utf8') : ''}`.trim() || '(no output)';

  let stopped: Promise<void> | undefined;
  const nginx: Nginx = {
    url: `http://127.0.0.1:${port}`,
    port,
    pid,
    dir,
    async accessLog() {
      const file = path.join(dir, 'access.log');
      if (!existsSync(file)) return [];
      return (await readFile(file, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    },
    stop() {
      stopped ??= (async () => {
        if (running()) {
          process.kill(pid, 'SIGTERM');
          const timeout = sleep(10000).then(() => 'timeout');
          if ((await Promise.race([exited.then(() => 'exited'), timeout])) === 'timeout' && running()) {
            process.kill(pid, 'SIGKILL');
            await exited;
          }
        }
        await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };

  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    if (!running()) {
      const why = await errors();
      await nginx.stop();
      throw new Error(`nginx exited at start:\n${why}`);
    }
    try {
      const res = await fetch(`${nginx.url}/healthz`);
      await res.arrayBuffer();
      if (res.ok) return nginx;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  const why = await errors();
  await nginx.stop();
  throw new Error(`nginx did not answer /healthz:\n${why}`);
}
