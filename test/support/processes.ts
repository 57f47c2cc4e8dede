import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { TEST_ENV } from './server.js';
import { stablePort } from './stable-port.js';

export interface Instance {
  url: string;
  port: number;
  pid: number;
  child: ChildProcess;
  output: () => string;
  /** SIGKILL: a crash, nothing cleaned up. */
  kill(): void;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  exited: Promise<number | null>;
}

const live = new Set<Instance>();

/**
 * Starts one real service process (`node --import tsx server/main.ts`) on the test database; `argv`
 * replaces what follows `node` (a test measuring the process as `npm start` runs it: dist/).
 */
export async function startInstance(env: Record<string, string> = {}, argv?: string[]): Promise<Instance> {
  return untilReady(await spawnInstance(env, argv));
}

/** Starts the process without waiting for it to be ready (a test that must act during start-up). */
export async function spawnInstance(
  env: Record<string, string> = {},
  argv = ['--import', 'tsx', 'server/main.ts'],
): Promise<Instance> {
  // A given PORT restarts an instance where it was (behind a balancer that knows that address).
  const port = env.PORT ? Number(env.PORT) : await stablePort();
  const child = spawn(process.execPath, argv, {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      ...TEST_ENV,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      DATABASE_URL: process.env.TEST_DATABASE_URL ?? '',
      PORT: String(port),
      HOST: '127.0.0.1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const instance: Instance = {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
    child,
    output: () => out,
    exited,
    kill() {
      if (child.exitCode === null && child.signalCode === null) process.kill(instance.pid, 'SIGKILL');
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(instance.pid, 'SIGTERM');
      return exited;
    },
  };
  live.add(instance);
  exited.then(() => live.delete(instance));
  return instance;
}

/** Waits (60 s at most) until the instance answers /readyz with 200. */
export async function untilReady(instance: Instance): Promise<Instance> {
  const { child } = instance;
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`instance exited early (${child.exitCode}):\n${instance.output()}`);
    try {
      const res = await fetch(`${instance.url}/readyz`);
      if (res.ok) return instance;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  instance.kill();
  throw new Error(`instance did not become ready:\n${instance.output()}`);
}

export async function startInstances(n: number, env: Record<string, string> = {}): Promise<Instance[]> {
  const list: Instance[] = [];
  // One at a time: start-up runs migrations under an advisory lock anyway.
  for (let i = 0; i < n; i++) list.push(await startInstance(env));
  return list;
}

/** Kills every instance still running (root afterAll and each suite's after hook call it). */
export async function killAll(): Promise<void> {
  const waits = [...live].map((i) => {
    i.kill();
    return i.exited;
  });
  await Promise.all(waits);
}
