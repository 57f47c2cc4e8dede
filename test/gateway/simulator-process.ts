import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stablePort } from '../support/stable-port.js';

export interface SimulatorProcess {
  url: string;
  pid: number;
  /** SIGKILL by pid and wait for the exit; safe to call twice. */
  stop(): Promise<void>;
}

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The simulator as its own process (`npm run gateway`), so that the client's calls cross a real
 * process boundary as they do in production. Resolves once it prints the line saying it listens.
 */
export async function startSimulatorProcess(): Promise<SimulatorProcess> {
  const port = await stablePort();
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'server/gateway-cli.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', GATEWAY_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
    await exited;
  };
  let out = '';
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('listening on')) resolve();
    });
    child.stderr!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    void exited.then(() => reject(new Error(`gateway simulator exited before listening: ${out}`)));
  });
  try {
    await listening;
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop };
}
