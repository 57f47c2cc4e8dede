import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type pg from 'pg';
import { signToken } from '../routers/auth/jwt.js';
import type { LoadRequest } from './load.js';
import type { BenchDatabase } from './postgres.js';
import type { Child } from './processes.js';
import type { Row } from './report.js';
import {
  ADMIN_BASE,
  ADMINS,
  type Options,
  ROOT,
  type ScenarioId,
  SECRETS,
  TENANT,
  USER_BASE,
  USERS,
} from './settings.js';

export interface ReplayKey {
  admin: number;
  key: string;
}

/**
 * Everything one `npm run bench` holds, in one object handed to every scenario: the options, the
 * processes and connections it started, what it measured so far, and the request makers (each run
 * has its own sequence numbers). Nothing of a run lives at module level.
 */
export class BenchRun implements Options {
  readonly QUICK: boolean;
  readonly PROFILE: boolean;
  readonly ONLY: string[] | undefined;
  readonly P: Options['P'];
  readonly ROUNDS: number;
  readonly SEGMENT: number;
  readonly CONNECTIONS: number;
  readonly SERVER_ENV: Record<string, string>;
  readonly PURGE_BUSY_PERCENT: number | undefined;
  readonly DB_TCP: boolean;

  readonly t0 = Date.now();
  readonly GIT = gitState();
  readonly PROFILE_DIR = path.join(ROOT, 'bench', 'results', 'profiles', stamp());
  readonly results: Record<string, unknown> = {};
  readonly rows: Row[] = [];
  /** The service's RSS after each interleaved segment (which scenario grows it). */
  readonly segmentMemory: Array<{ after: string; hwmMb?: number; rssMb?: number }> = [];
  /** CPU ms per final answer (or pgbench transaction), by process, for the interleaved scenarios. */
  readonly cpuTable: Array<{
    name: string;
    service: number;
    postgres: number;
    loadGenerator: number;
    gateway: number;
  }> = [];
  readonly profiles: Record<string, unknown> = {};
  /** Pids this run started: SIGKILLed on exit whatever happened. */
  readonly pids = new Set<number>();
  private readonly cleanups: Array<() => Promise<void>> = [];
  private cleaning: Promise<void> | undefined;

  // Set once started.
  db!: BenchDatabase;
  sql!: pg.Pool;
  server!: Child;
  bare?: Child;
  /** The hand-written Express + pg peer (bench/peer.ts), checking the caller's row in its write. */
  peer?: Child;
  /** The same peer checking the token's role only (PEER_USER_CHECK=token), reported beside it. */
  peerToken?: Child;
  serverChild: Child | undefined;
  /** Starts one more instance of the service as `server` was started (same database and settings). */
  launchService!: (name: string) => Promise<Child>;
  postmasterPid: number | undefined;
  /** The gateway simulator's process: it shares the machine's CPUs with the service and PostgreSQL. */
  gatewayPid: number | undefined;
  /** Records written by fill() so far (their ids continue from here). */
  fillSeq = 0;

  // Requests.
  readonly runId = randomUUID().slice(0, 8);
  private seq = 0;
  readonly admins = Array.from({ length: ADMINS }, (_, i) => this.token(ADMIN_BASE + 1 + i, 'admin'));
  readonly users = Array.from({ length: USERS }, (_, i) => this.token(USER_BASE + 1 + i, 'user'));
  readonly userBody = JSON.stringify({ name: 'Bench User', age: 30 });

  constructor(options: Options) {
    this.QUICK = options.QUICK;
    this.PROFILE = options.PROFILE;
    this.ONLY = options.ONLY;
    this.P = options.P;
    this.ROUNDS = options.ROUNDS;
    this.SEGMENT = options.SEGMENT;
    this.CONNECTIONS = options.CONNECTIONS;
    this.SERVER_ENV = options.SERVER_ENV;
    this.PURGE_BUSY_PERCENT = options.PURGE_BUSY_PERCENT;
    this.DB_TCP = options.DB_TCP;
    this.results.profiles = this.profiles;
  }

  readonly log = (line: string) =>
    process.stderr.write(`[bench ${((Date.now() - this.t0) / 1000).toFixed(1)}s] ${line}\n`);

  readonly enabled = (s: ScenarioId) => !this.ONLY || this.ONLY.includes(s);

  token(id: number, role: 'admin' | 'user'): string {
    return `Bearer ${signToken(SECRETS.JWT_SECRET, { tenantId: TENANT, userId: String(id), role }, 4 * 3600).token}`;
  }

  readonly plainUser = (): LoadRequest => ({
    method: 'POST',
    path: '/api/v1/users',
    headers: { authorization: this.admins[this.seq++ % ADMINS] },
    body: this.userBody,
  });

  readonly idemUser = (): LoadRequest => ({
    method: 'POST',
    path: '/api/v1/users',
    headers: { authorization: this.admins[this.seq++ % ADMINS], 'idempotency-key': randomUUID() },
    body: this.userBody,
  });

  readonly idemOrder = (): LoadRequest => {
    const i = this.seq++;
    return {
      method: 'POST',
      path: '/api/v1/orders',
      headers: { authorization: this.users[i % USERS], 'idempotency-key': randomUUID() },
      body: JSON.stringify({ merchantOrderNo: `o-${this.runId}-${i}`, amount: '10.50' }),
    };
  };

  readonly replayRequest = (k: ReplayKey): LoadRequest => ({
    method: 'POST',
    path: '/api/v1/users',
    headers: { authorization: this.admins[k.admin], 'idempotency-key': k.key },
    body: this.userBody,
  });

  readonly newReplayKeys = (n: number): ReplayKey[] =>
    Array.from({ length: n }, (_, i) => ({ admin: i % ADMINS, key: randomUUID() }));

  /** Registers a clean-up step; they run last-in first-out, once, whatever ended the run. */
  onCleanup(step: () => Promise<void>): void {
    this.cleanups.push(step);
  }

  cleanup(): Promise<void> {
    this.cleaning ??= (async () => {
      while (this.cleanups.length > 0) {
        const step = this.cleanups.pop();
        await step?.().catch((err: unknown) =>
          this.log(`cleanup: ${err instanceof Error ? err.message : err}`),
        );
      }
    })();
    return this.cleaning;
  }
}

/** The commit measured, and whether the service's sources differ from it. */
function gitState(): { commit?: string; dirty?: string[] } {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    const dirty = execFileSync(
      'git',
      [
        'status',
        '--porcelain',
        '--',
        'server',
        'routers',
        'idempotency',
        'models',
        'gateway',
        'payments',
        'core',
      ],
      { cwd: ROOT, encoding: 'utf8' },
    )
      .split('\n')
      .filter(Boolean);
    return { commit, dirty };
  } catch {
    return {};
  }
}

export function stamp(): string {
  return new Date().toISOString().replace(/[:.]/g, '-');
}
