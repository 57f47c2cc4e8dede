import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { killQuietly } from './postgres.js';

export interface Child {
  name: string;
  pid: number;
  url: string;
  child: ChildProcess;
  /** The last lines it printed (for error messages). */
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
  exited: Promise<void>;
}

/**
 * Starts `node <args>` from the repository root and waits until `readyPath` answers 200 on
 * loopback. With `ipc`, an IPC channel is opened (the query counter listens on it).
 */
export async function startNode(opts: {
  name: string;
  args: string[];
  env: Record<string, string>;
  port: number;
  readyPath: string;
  ipc?: boolean;
  timeoutMs?: number;
}): Promise<Child> {
  const child = spawn(process.execPath, opts.args, {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...opts.env },
    stdio: opts.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-8000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const handle: Child = {
    name: opts.name,
    pid: child.pid ?? -1,
    url: `http://127.0.0.1:${opts.port}`,
    child,
    output: () => out,
    exited,
    async stop(graceMs = 15000) {
      if (!alive()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => killQuietly(handle.pid), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + (opts.timeoutMs ?? 60000);
  while (Date.now() < deadline) {
    if (!alive()) throw new Error(`${opts.name} exited during start-up:\n${out}`);
    try {
      const res = await fetch(`${handle.url}${opts.readyPath}`);
      if (res.ok) return handle;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  killQuietly(handle.pid);
  throw new Error(`${opts.name} did not become ready:\n${out}`);
}

export interface ProcMemory {
  rssMb: number;
  hwmMb: number;
  /** Of the RSS: anonymous memory (heaps, stacks) and file-backed pages (the node binary, libraries). */
  anonMb: number;
  fileMb: number;
}

/** Resident memory of a process from /proc (Linux): current (VmRSS) and peak (VmHWM), in MB. */
export function memoryOf(pid: number): ProcMemory | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return {
      rssMb: kb('VmRSS') / 1024,
      hwmMb: kb('VmHWM') / 1024,
      anonMb: kb('RssAnon') / 1024,
      fileMb: kb('RssFile') / 1024,
    };
  } catch {
    return undefined;
  }
}

/** Samples VmRSS every `everyMs`; `peak()` is the larger of the sampled maximum and VmHWM. */
export function sampleMemory(pid: number, everyMs = 250) {
  let maxRss = 0;
  let lastHwm = 0;
  let atMax: ProcMemory | undefined;
  const tick = () => {
    const m = memoryOf(pid);
    if (!m) return;
    if (m.rssMb > maxRss) atMax = m;
    maxRss = Math.max(maxRss, m.rssMb);
    lastHwm = Math.max(lastHwm, m.hwmMb);
  };
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return {
    peak(): { sampledMaxRssMb: number; vmHwmMb: number; atSampledMax?: ProcMemory } {
      tick();
      return { sampledMaxRssMb: maxRss, vmHwmMb: lastHwm, atSampledMax: atMax };
    },
    stop() {
      clearInterval(timer);
    },
  };
}

/** Sends one IPC message and waits for the first reply of the given type. */
export function ask<T>(
  child: ChildProcess,
  message: object,
  replyType: string,
  timeoutMs = 10000,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      reject(new Error(`no ${replyType} reply from pid ${child.pid}`));
    }, timeoutMs);
    const onMessage = (m: { type?: string }) => {
      if (m?.type !== replyType) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(m as T);
    };
    child.on('message', onMessage);
    child.send(message);
  });
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

function statOf(pid: number): { ppid: number; selfMs: number; childrenMs: number } | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm)": state ppid ... utime(14) stime(15) cutime(16) cstime(17).
    const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
    return {
      ppid: Number(f[1]),
      selfMs: (Number(f[11]) + Number(f[12])) * TICK_MS,
      childrenMs: (Number(f[13]) + Number(f[14])) * TICK_MS,
    };
  } catch {
    return undefined;
  }
}

/** CPU time (ms) a process has used. */
export function cpuOf(pid: number): number {
  return statOf(pid)?.selfMs ?? Number.NaN;
}

/**
 * CPU time (ms) of a PostgreSQL server: the postmaster, its live children (backends, walwriter...),
 * and the children that have exited (their time is added to the postmaster's cutime/cstime when it
 * reaps them, so short-lived pgbench backends are counted too).
 */
export function postgresCpuOf(postmaster: number): number {
  const root = statOf(postmaster);
  if (!root) return Number.NaN;
  let total = root.selfMs + root.childrenMs;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = statOf(Number(entry));
    if (s && s.ppid === postmaster) total += s.selfMs;
  }
  return total;
}
