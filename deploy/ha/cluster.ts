/**
 * A replicated PostgreSQL on one machine, on loopback ports and a temporary folder: 3 etcd members,
 * 3 PostgreSQL 15 members under Patroni (synchronous replication), HAProxy sending connections to the
 * leader, PgBouncer in transaction mode in front of HAProxy; and, from the command line, N service
 * instances behind nginx with the gateway simulator.
 *
 *   npm run ha -- up [--dir D] [--base 5440] [--instances 3]   start everything, print the addresses
 *   npm run ha -- status [--dir D]                              the members and their roles
 *   npm run ha -- down [--dir D]                                stop everything, remove the folder
 *
 * Every process is started in a process group of its own and recorded (pid) in D/state.json; `down`
 * kills those groups and PostgreSQL's (from each postmaster.pid), nothing by name. Tests use the same
 * functions (test/ha/failover.test.ts). Needs Debian's patroni, etcd-server, haproxy, pgbouncer and
 * postgresql-15 (deploy/ha/README.md).
 */
import { spawn } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, openSync, readFileSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { findNginx, renderNginxConf } from '../nginx-conf.js';

const HERE = import.meta.dirname;
const PROJECT = path.resolve(HERE, '../..');
const PG_BIN = '/usr/lib/postgresql/15/bin';
const DATABASE = 'app';
const ROLE = 'app';

/** The programs the cluster needs, and where Debian puts them. */
export const REQUIRED_PROGRAMS = {
  patroni: '/usr/bin/patroni',
  etcd: '/usr/bin/etcd',
  haproxy: '/usr/sbin/haproxy',
  pgbouncer: '/usr/sbin/pgbouncer',
  postgres: `${PG_BIN}/postgres`,
  pg_rewind: `${PG_BIN}/pg_rewind`,
} as const;

/** The programs that are missing (empty when the cluster can run here). */
export function missingPrograms(): string[] {
  return Object.entries(REQUIRED_PROGRAMS)
    .filter(([, file]) => {
      try {
        accessSync(file, constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
    .map(([name]) => name);
}

/** Every port from one base, so that two clusters (a user's and a test's) can run side by side. */
export function portsFrom(base: number) {
  return {
    haproxy: base,
    pgbouncer: base + 6,
    stats: base + 9,
    pg: (i: number) => base + 1 + i,
    rest: (i: number) => base + 1001 + i,
    etcdClient: (i: number) => base + 2000 + 2 * i,
    etcdPeer: (i: number) => base + 2001 + 2 * i,
    nginx: base + 100,
    instance: (i: number) => base + 101 + i,
    gateway: base + 99,
  };
}
export type Ports = ReturnType<typeof portsFrom>;

export interface ClusterOptions {
  /** The first port (default 5440); see portsFrom. */
  base?: number;
  /** The run's folder (default: a new one under the system's temp folder). */
  dir?: string;
  /** etcd members: 3 (default) or 1. */
  etcdMembers?: number;
  /** Patroni's synchronous_mode_strict (default true; deploy/ha/README.md says why). */
  strict?: boolean;
  /** The leader key's time to live in seconds (default 8): the upper bound of a failover's detection. */
  ttl?: number;
  /** The wait bounds the service's role gets (ALTER ROLE ... SET); the service's own defaults. */
  bounds?: { waitMs: number; leaseMs: number };
  /** PgBouncer's server connections for the service's role (default 40). */
  poolSize?: number;
  log?: (line: string) => void;
}

export interface MemberInfo {
  name: string;
  role: string;
  state: string;
  timeline?: number;
  lag?: number | string;
}

interface ProcessRecord {
  name: string;
  pid: number;
}

interface State {
  base: number;
  members: string[];
  processes: ProcessRecord[];
}

export interface Cluster {
  dir: string;
  ports: Ports;
  members: string[];
  /** What the service connects to: PgBouncer (transaction mode) in front of HAProxy. */
  databaseUrl: string;
  /** HAProxy, the leader directly (migrations, an operator). */
  directUrl: string;
  /** A superuser on the leader, through HAProxy (tests read the tables with it). */
  adminUrl: string;
  /** The members as Patroni reports them (from any member that answers). */
  status(): Promise<MemberInfo[]>;
  /** The current leader's name, once there is one. */
  leader(): Promise<string | undefined>;
  /** Waits until there is a leader, every other member is replicating, and one is synchronous. */
  waitHealthy(timeoutMs?: number): Promise<MemberInfo[]>;
  /** The machine dies: SIGKILL to the member's Patroni and to every process of its PostgreSQL. */
  killMember(name: string): Promise<void>;
  /** Starts the member's Patroni again on its data: it rejoins as a replica (pg_rewind when needed). */
  startMember(name: string): Promise<void>;
  /**
   * Patroni's `nosync` tag on a member (written to its patroni.yml, then `POST /reload`): a member
   * tagged so is never picked as the synchronous standby, so the leader moves that role to another
   * replica. Patroni's own knob for where the synchronous copy lives; nothing is promoted by it.
   */
  setNoSync(name: string, on: boolean): Promise<void>;
  /** The member's Patroni log (Patroni's and pg_rewind's messages). */
  memberLog(name: string): string;
  /** Starts a process that `down` will stop too (a service instance, nginx, the gateway). */
  spawnRecorded(name: string, command: string, args: string[], env?: Record<string, string>): Promise<number>;
  /** Stops everything this cluster started and removes its folder. */
  down(): Promise<void>;
}

const isRoot = () => process.getuid?.() === 0;

/** PostgreSQL, Patroni and PgBouncer refuse to run as root: as root, they run as `postgres`. */
export function asPostgres(command: string, args: string[]): [string, string[]] {
  if (!isRoot()) return [command, args];
  return ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', command, ...args]];
}

/** As root: gives a file or folder to `postgres`, which the processes above run as. */
export async function ownedByPostgres(target: string): Promise<void> {
  if (!isRoot()) return;
  const uid = Number(readFileSync('/etc/passwd', 'utf8').match(/^postgres:[^:]*:(\d+):(\d+):/m)?.[1]);
  const gid = Number(readFileSync('/etc/passwd', 'utf8').match(/^postgres:[^:]*:(\d+):(\d+):/m)?.[2]);
  if (!Number.isInteger(uid)) throw new Error('there is no postgres user on this machine');
  await chown(target, uid, gid);
}

/** Fills every {{NAME}}; a placeholder left without a value is an error, not a silent blank. */
export function fill(template: string, values: Record<string, string | number | boolean>): string {
  return template.replace(/\{\{([A-Z_]+)\}\}/g, (_, name: string) => {
    if (!(name in values)) throw new Error(`no value for {{${name}}}`);
    return String(values[name]);
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !isZombie(pid);
  } catch {
    return false;
  }
}

function isZombie(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] === 'Z';
  } catch {
    return false;
  }
}

/** The process group of a pid (field 5 of /proc/pid/stat), or undefined once it is gone. */
function groupOf(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ');
    const pgid = Number(fields?.[2]);
    return Number.isInteger(pgid) && pgid > 1 ? pgid : undefined;
  } catch {
    return undefined;
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

/** The postmaster's pid from its data folder, when it runs. */
function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
  detail: () => string = () => '',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    await sleep(250);
  }
  throw new Error(
    `${what}: not within ${timeoutMs} ms${last ? ` (last error: ${String(last)})` : ''}${detail()}`,
  );
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function getJson(url: string): Promise<unknown> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return res.json();
}

/** Opens the cluster recorded in `dir` (started by `up`). */
export async function openCluster(dir: string, opts: ClusterOptions = {}): Promise<Cluster> {
  const state = JSON.parse(await readFile(path.join(dir, 'state.json'), 'utf8')) as State;
  return handle(dir, state, opts);
}

function handle(dir: string, state: State, opts: ClusterOptions): Cluster {
  const ports = portsFrom(state.base);
  const log = opts.log ?? (() => {});
  const memberIndex = (name: string) => {
    const i = state.members.indexOf(name);
    if (i < 0) throw new Error(`no member named ${name}`);
    return i;
  };
  const dataDir = (name: string) => path.join(dir, name, 'data');
  const save = () => writeFile(path.join(dir, 'state.json'), JSON.stringify(state, null, 2));

  async function spawnRecorded(
    name: string,
    command: string,
    args: string[],
    env: Record<string, string> = {},
  ): Promise<number> {
    const out = openSync(path.join(dir, 'logs', `${name}.log`), 'a');
    const child = spawn(command, args, {
      cwd: PROJECT,
      detached: true,
      stdio: ['ignore', out, out],
      env: { ...process.env, ...env },
    });
    closeSync(out);
    const pid = child.pid;
    if (pid === undefined) throw new Error(`${name}: could not start ${command}`);
    child.unref();
    state.processes = state.processes.filter((p) => p.name !== name || alive(p.pid));
    state.processes.push({ name, pid });
    await save();
    return pid;
  }

  async function status(): Promise<MemberInfo[]> {
    for (let i = 0; i < state.members.length; i++) {
      try {
        const body = (await getJson(`http://127.0.0.1:${ports.rest(i)}/cluster`)) as {
          members?: MemberInfo[];
        };
        if (Array.isArray(body.members)) return body.members;
      } catch {
        // this member's Patroni is down: ask the next
      }
    }
    return [];
  }

  const cluster: Cluster = {
    dir,
    ports,
    members: state.members,
    databaseUrl: `postgres://${ROLE}@127.0.0.1:${ports.pgbouncer}/${DATABASE}`,
    directUrl: `postgres://${ROLE}@127.0.0.1:${ports.haproxy}/${DATABASE}`,
    adminUrl: `postgres://postgres@127.0.0.1:${ports.haproxy}/${DATABASE}`,
    status,
    async leader() {
      return (await status()).find((m) => m.role === 'leader' && m.state === 'running')?.name;
    },
    waitHealthy(timeoutMs = 120000) {
      let seen: MemberInfo[] = [];
      return waitFor(
        'the cluster to have a leader and every replica streaming, one synchronous',
        timeoutMs,
        async () => {
          const members = await status();
          seen = members;
          const leader = members.filter((m) => m.role === 'leader' && m.state === 'running');
          const replicas = members.filter(
            (m) =>
              (m.role === 'replica' || m.role === 'sync_standby') &&
              ['running', 'streaming'].includes(m.state),
          );
          const sync = members.filter((m) => m.role === 'sync_standby');
          const ok = leader.length === 1 && replicas.length === state.members.length - 1 && sync.length >= 1;
          return ok ? members : undefined;
        },
        () => ` (members: ${JSON.stringify(seen)})`,
      );
    },
    async killMember(name) {
      const i = memberIndex(name);
      const patroni = state.processes.find((p) => p.name === `patroni-${name}`);
      const postmaster = postmasterPid(dataDir(name));
      const pgGroup = postmaster === undefined ? undefined : groupOf(postmaster);
      if (patroni) killGroup(patroni.pid, 'SIGKILL');
      if (pgGroup !== undefined) killGroup(pgGroup, 'SIGKILL');
      await waitFor(`${name} (member ${i}) to die`, 10000, async () =>
        (!patroni || !alive(patroni.pid)) && (postmaster === undefined || !alive(postmaster))
          ? true
          : undefined,
      );
      log(`killed ${name} (Patroni ${patroni?.pid}, PostgreSQL group ${pgGroup})`);
    },
    async startMember(name) {
      const i = memberIndex(name);
      const [command, args] = asPostgres(REQUIRED_PROGRAMS.patroni, [path.join(dir, name, 'patroni.yml')]);
      const pid = await spawnRecorded(`patroni-${name}`, command, args);
      log(`started ${name} (member ${i}, Patroni ${pid})`);
    },
    async setNoSync(name, on) {
      const i = memberIndex(name);
      const file = path.join(dir, name, 'patroni.yml');
      const text = await readFile(file, 'utf8');
      if (!/^\s+nosync: (true|false)$/m.test(text)) throw new Error(`${file}: no nosync tag to set`);
      await writeFile(file, text.replace(/^(\s+nosync:) (true|false)$/m, `$1 ${on}`));
      const res = await fetch(`http://127.0.0.1:${ports.rest(i)}/reload`, {
        method: 'POST',
        signal: AbortSignal.timeout(5000),
      });
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`${name}: POST /reload answered ${res.status}`);
      log(`${name}: nosync ${on}`);
    },
    memberLog: (name) => path.join(dir, 'logs', `patroni-${name}.log`),
    spawnRecorded,
    async down() {
      // Service side first (they would only log connection errors), then the database side.
      const order = (p: ProcessRecord) =>
        p.name.startsWith('patroni-')
          ? 2
          : p.name.startsWith('etcd-')
            ? 3
            : p.name === 'pgbouncer' || p.name === 'haproxy'
              ? 1
              : 0;
      const groups: number[] = [];
      for (const rank of [0, 1, 2, 3]) {
        for (const p of state.processes.filter((x) => order(x) === rank)) {
          killGroup(p.pid, rank === 0 ? 'SIGTERM' : 'SIGKILL');
          groups.push(p.pid);
        }
        if (rank === 2) {
          for (const name of state.members) {
            const postmaster = postmasterPid(dataDir(name));
            const pgGroup = postmaster === undefined ? undefined : groupOf(postmaster);
            if (pgGroup !== undefined) {
              killGroup(pgGroup, 'SIGKILL');
              groups.push(pgGroup);
            }
          }
        }
      }
      const left = () => groups.filter((g) => alive(g));
      const deadline = Date.now() + 15000;
      while (left().length > 0 && Date.now() < deadline) {
        await sleep(100);
        for (const g of left()) killGroup(g, 'SIGKILL');
      }
      if (left().length > 0) throw new Error(`processes still running after down: ${left().join(', ')}`);
      await rm(dir, { recursive: true, force: true });
      log(`down: stopped ${groups.length} process groups, removed ${dir}`);
    },
  };
  return cluster;
}

/** Starts etcd, the Patroni members, HAProxy and PgBouncer; resolves once writes reach a leader. */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const missing = missingPrograms();
  if (missing.length > 0) throw new Error(`missing programs: ${missing.join(', ')} (deploy/ha/README.md)`);
  const base = opts.base ?? 5440;
  const ports = portsFrom(base);
  const log = opts.log ?? (() => {});
  const dir = opts.dir ?? (await mkdtemp(path.join(os.tmpdir(), 'idem-ha-')));
  await mkdir(path.join(dir, 'logs'), { recursive: true });
  if (existsSync(path.join(dir, 'state.json')))
    throw new Error(`${dir} already holds a cluster (down it first)`);
  const etcdMembers = opts.etcdMembers ?? 3;
  const members = ['pg1', 'pg2', 'pg3'];
  const state: State = { base, members, processes: [] };
  await writeFile(path.join(dir, 'state.json'), JSON.stringify(state));
  const cluster = handle(dir, state, opts);
  try {
    for (const port of [ports.haproxy, ports.pgbouncer, ...members.map((_, i) => ports.pg(i))])
      if (await portOpen(port)) throw new Error(`port ${port} is taken: choose another --base`);
    // --- etcd ---
    const etcdNames = Array.from({ length: etcdMembers }, (_, i) => `etcd${i + 1}`);
    const initialCluster = etcdNames.map((n, i) => `${n}=http://127.0.0.1:${ports.etcdPeer(i)}`).join(',');
    for (const [i, name] of etcdNames.entries()) {
      await cluster.spawnRecorded(`etcd-${name}`, REQUIRED_PROGRAMS.etcd, [
        `--name=${name}`,
        `--data-dir=${path.join(dir, name)}`,
        `--listen-client-urls=http://127.0.0.1:${ports.etcdClient(i)}`,
        `--advertise-client-urls=http://127.0.0.1:${ports.etcdClient(i)}`,
        `--listen-peer-urls=http://127.0.0.1:${ports.etcdPeer(i)}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${ports.etcdPeer(i)}`,
        `--initial-cluster=${initialCluster}`,
        `--initial-cluster-token=idem-ha-${base}`,
        '--initial-cluster-state=new',
        '--log-level=warn',
      ]);
    }
    for (const [i] of etcdNames.entries())
      await waitFor(`etcd member ${i + 1} to be healthy`, 30000, async () => {
        const body = (await getJson(`http://127.0.0.1:${ports.etcdClient(i)}/health`)) as { health?: string };
        return body.health === 'true' ? true : undefined;
      });
    log(`etcd: ${etcdMembers} member(s) healthy`);

    // --- Patroni + PostgreSQL ---
    const template = await readFile(path.join(HERE, 'patroni.yml'), 'utf8');
    const ttl = opts.ttl ?? 8;
    for (const [i, name] of members.entries()) {
      const memberDir = path.join(dir, name);
      await mkdir(memberDir, { recursive: true });
      await writeFile(
        path.join(memberDir, 'patroni.yml'),
        fill(template, {
          SCOPE: `idem-ha-${base}`,
          NAME: name,
          REST_PORT: ports.rest(i),
          ETCD_HOSTS: etcdNames.map((_, j) => `127.0.0.1:${ports.etcdClient(j)}`).join(','),
          TTL: ttl,
          RETRY_TIMEOUT: Math.max(1, Math.floor((ttl - 1) / 2)),
          STRICT: opts.strict ?? true,
          PG_PORT: ports.pg(i),
          DATA_DIR: path.join(memberDir, 'data'),
          BIN_DIR: PG_BIN,
          PGPASS: path.join(memberDir, 'pgpass'),
          SOCKET_DIR: memberDir,
        }),
      );
      await ownedByPostgres(memberDir);
    }
    await ownedByPostgres(dir);
    await ownedByPostgres(path.join(dir, 'logs'));
    // The first member bootstraps (initdb); the others then copy it (pg_basebackup).
    await cluster.startMember(members[0]);
    await waitFor(
      'the first member to bootstrap and lead',
      90000,
      async () => (await cluster.leader()) ?? undefined,
    );
    for (const name of members.slice(1)) await cluster.startMember(name);
    await cluster.waitHealthy();
    log(`patroni: leader ${await cluster.leader()}, ${members.length - 1} replicas, one synchronous`);

    // --- HAProxy ---
    const servers = members
      .map((name, i) => `    server ${name} 127.0.0.1:${ports.pg(i)} maxconn 200 check port ${ports.rest(i)}`)
      .join('\n');
    const haproxyCfg = path.join(dir, 'haproxy.cfg');
    await writeFile(
      haproxyCfg,
      fill(await readFile(path.join(HERE, 'haproxy.cfg'), 'utf8'), {
        PORT: ports.haproxy,
        STATS_PORT: ports.stats,
        SERVERS: servers,
      }),
    );
    await cluster.spawnRecorded('haproxy', REQUIRED_PROGRAMS.haproxy, ['-db', '-f', haproxyCfg]);
    // HAProxy starts with every server up until its checks say otherwise: wait until exactly the
    // leader is up, so that no connection made from here on lands on a replica.
    const leaderName = await cluster.leader();
    await waitFor(`HAProxy to route to the leader (${leaderName}) only`, 30000, async () => {
      const up = await haproxyUpServers(ports.stats);
      return up.length === 1 && up[0] === leaderName ? true : undefined;
    });
    // --- the service's role and database ---
    const bounds = opts.bounds ?? { waitMs: 1000, leaseMs: 30000 };
    const admin = new pg.Client({ connectionString: cluster.adminUrl.replace(`/${DATABASE}`, '/postgres') });
    admin.on('error', () => {});
    await admin.connect();
    try {
      await admin.query(`CREATE ROLE ${ROLE} LOGIN`);
      // What the service sends as startup parameters (core/database.ts), carried by the role, so that
      // a connection through PgBouncer (which drops them) has them too.
      await admin.query(`ALTER ROLE ${ROLE} SET lock_timeout = '${Math.max(1, bounds.waitMs)}ms'`);
      await admin.query(
        `ALTER ROLE ${ROLE} SET idle_in_transaction_session_timeout = '${Math.max(1000, bounds.leaseMs)}ms'`,
      );
      await admin.query(`ALTER ROLE ${ROLE} SET statement_timeout = '${Math.max(30000, bounds.leaseMs)}ms'`);
      await admin.query(`CREATE DATABASE ${DATABASE} OWNER ${ROLE}`);
    } finally {
      await admin.end();
    }

    // --- PgBouncer ---
    const authFile = path.join(dir, 'pgbouncer-users.txt');
    await writeFile(authFile, `"${ROLE}" ""\n"postgres" ""\n`);
    const ini = path.join(dir, 'pgbouncer.ini');
    await writeFile(
      ini,
      fill(await readFile(path.join(HERE, 'pgbouncer.ini'), 'utf8'), {
        DATABASE,
        HAPROXY_PORT: ports.haproxy,
        PORT: ports.pgbouncer,
        AUTH_FILE: authFile,
        POOL_SIZE: opts.poolSize ?? 40,
        // A client waiting for a server connection (all busy, or no leader yet) gets an error, answered
        // 503, after the service's wait bound (CONTRACT section 5: a busy pool is a bounded wait too).
        QUERY_WAIT_TIMEOUT: (Math.max(100, bounds.waitMs) / 1000).toFixed(3),
        LOG_FILE: path.join(dir, 'logs', 'pgbouncer-own.log'),
        PID_FILE: path.join(dir, 'pgbouncer.pid'),
      }),
    );
    for (const file of [authFile, ini]) await ownedByPostgres(file);
    const [command, args] = asPostgres(REQUIRED_PROGRAMS.pgbouncer, [ini]);
    await cluster.spawnRecorded('pgbouncer', command, args);
    await waitFor('PgBouncer to serve the database', 30000, async () => {
      const client = new pg.Client({ connectionString: cluster.databaseUrl });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('SELECT 1');
        return true;
      } finally {
        await client.end().catch(() => {});
      }
    });
    log(`ready: service URL ${cluster.databaseUrl} (PgBouncer), leader via HAProxy ${cluster.directUrl}`);
    return cluster;
  } catch (err) {
    const logs = await tailLogs(dir);
    await cluster.down().catch(() => {});
    throw new Error(`${(err as Error).message}\n${logs}`);
  }
}

/** The servers HAProxy routes writes to now (its stats page, CSV: status UP). */
export async function haproxyUpServers(statsPort: number): Promise<string[]> {
  const res = await fetch(`http://127.0.0.1:${statsPort}/;csv`, { signal: AbortSignal.timeout(2000) });
  const rows = (await res.text()).split('\n').map((line) => line.split(','));
  return rows
    .filter((r) => r[0] === 'primary' && r[1] !== 'FRONTEND' && r[1] !== 'BACKEND' && r[17]?.startsWith('UP'))
    .map((r) => r[1]);
}

/** The last lines of every log in the run's folder (for an error report). */
export async function tailLogs(dir: string, lines = 15): Promise<string> {
  const { readdir } = await import('node:fs/promises');
  const folder = path.join(dir, 'logs');
  if (!existsSync(folder)) return '';
  const parts: string[] = [];
  for (const file of await readdir(folder)) {
    const text = (await readFile(path.join(folder, file), 'utf8'))
      .trim()
      .split('\n')
      .slice(-lines)
      .join('\n');
    if (text) parts.push(`--- ${file}\n${text}`);
  }
  return parts.join('\n');
}

/** `up`'s service side: the gateway simulator, N instances on the cluster, nginx in front. */
async function startServiceTier(cluster: Cluster, instances: number, log: (line: string) => void) {
  const node = process.execPath;
  const gatewayPort = cluster.ports.gateway;
  await cluster.spawnRecorded('gateway', node, ['--import', 'tsx', 'server/gateway-cli.ts'], {
    GATEWAY_PORT: String(gatewayPort),
  });
  const upstreams: string[] = [];
  for (let i = 0; i < instances; i++) {
    const port = cluster.ports.instance(i);
    await cluster.spawnRecorded(`instance-${i + 1}`, node, ['--import', 'tsx', 'server/main.ts'], {
      DATABASE_URL: cluster.databaseUrl,
      PAYMENT_GATEWAY_URL: `http://127.0.0.1:${gatewayPort}`,
      PORT: String(port),
      HOST: '127.0.0.1',
    });
    upstreams.push(`127.0.0.1:${port}`);
    await waitFor(`instance ${i + 1} to be ready`, 60000, async () => {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      return res?.ok ? true : undefined;
    });
  }
  log(`${instances} instance(s) ready on ${upstreams.join(', ')}`);
  const nginx = findNginx();
  if (!nginx) {
    log('nginx is not installed: no balancer in front (apt-get install nginx)');
    return;
  }
  const nginxDir = path.join(cluster.dir, 'nginx');
  await mkdir(nginxDir, { recursive: true });
  const conf = renderNginxConf(await readFile(path.join(HERE, '..', 'nginx.conf'), 'utf8'), {
    listenPort: cluster.ports.nginx,
    upstreams,
    dir: nginxDir,
  });
  await writeFile(path.join(nginxDir, 'nginx.conf'), conf);
  await cluster.spawnRecorded('nginx', nginx, [
    '-p',
    nginxDir,
    '-c',
    path.join(nginxDir, 'nginx.conf'),
    '-g',
    `daemon off; pid ${nginxDir}/nginx.pid; error_log ${nginxDir}/error.log warn;`,
  ]);
  await waitFor('nginx to answer', 20000, async () => {
    const res = await fetch(`http://127.0.0.1:${cluster.ports.nginx}/healthz`).catch(() => undefined);
    return res?.ok ? true : undefined;
  });
  log(`nginx: http://127.0.0.1:${cluster.ports.nginx}`);
}

async function main(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      dir: { type: 'string', default: path.join(os.tmpdir(), 'idempotent-service-ha') },
      base: { type: 'string', default: '5440' },
      instances: { type: 'string', default: '3' },
      'etcd-members': { type: 'string', default: '3' },
    },
  });
  const command = positionals[0];
  const log = (line: string) => console.log(line);
  const base = Number(values.base);
  const instances = Number(values.instances);
  const etcdMembers = Number(values['etcd-members']);
  if (!Number.isInteger(base) || base < 1024 || base > 60000)
    throw new Error('--base: an integer in 1024..60000');
  if (!Number.isInteger(instances) || instances < 0 || instances > 9) throw new Error('--instances: 0..9');
  if (etcdMembers !== 1 && etcdMembers !== 3) throw new Error('--etcd-members: 1 or 3');
  if (command === 'up') {
    const cluster = await startCluster({ dir: values.dir, base, etcdMembers, log });
    try {
      await startServiceTier(cluster, instances, log);
    } catch (err) {
      await cluster.down();
      throw err;
    }
    log(`up: everything recorded in ${path.join(values.dir, 'state.json')}; stop with: npm run ha -- down`);
  } else if (command === 'down') {
    if (!existsSync(path.join(values.dir, 'state.json'))) {
      log(`nothing to stop: no ${path.join(values.dir, 'state.json')}`);
      return;
    }
    await (await openCluster(values.dir, { log })).down();
  } else if (command === 'status') {
    const cluster = await openCluster(values.dir);
    for (const m of await cluster.status())
      log(`${m.name}\t${m.role}\t${m.state}\ttimeline ${m.timeline ?? '-'}\tlag ${m.lag ?? '-'}`);
  } else {
    throw new Error('usage: npm run ha -- up|down|status [--dir D] [--base 5440] [--instances 3]');
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  });
}
