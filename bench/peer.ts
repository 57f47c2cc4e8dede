/**
 * The hand-written peer: what a competent engineer writes in an afternoon instead of this service,
 * answering `POST /api/v1/users` with the same envelope, status and Location. The benchmark runs it
 * as a separate process next to the service, on the same database (tables in a schema of their
 * own), with the same pool size, tokens and bodies, and proves it correct before measuring it
 * (bench/peer-check.ts).
 *
 * - Express 5, `pg` Pool (max = DB_POOL_MAX), jsonwebtoken (HS256 with a cached KeyObject, `exp`
 *   required, `sub` and `tid` format checked), zod (strict body; a 400 in the envelope).
 * - Without a key: one `INSERT ... ON CONFLICT DO NOTHING RETURNING` (a username or email already
 *   taken in the tenant is a 409, as in the service: the same two unique indexes).
 * - With `Idempotency-Key`: one transaction: `BEGIN` + `SET LOCAL lock_timeout`, the key's `INSERT
 *   ... ON CONFLICT DO NOTHING RETURNING` (a duplicate in flight waits on the key, bounded), on
 *   conflict a read: the stored answer replayed, 409 for another body, 202 while in flight; else the
 *   user's `INSERT`, the key's final `UPDATE` with the answer encrypted (AES-256-GCM), `COMMIT`.
 *
 * Usage: node --import tsx bench/peer.ts <port>   (env: DATABASE_URL, DB_POOL_MAX, JWT_SECRET,
 * RESPONSE_ENCRYPTION_KEY (base64, 32 bytes), PEER_SCHEMA (default peer), IDEMPOTENCY_WAIT_MS)
 */
import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { z } from 'zod';

const port = Number(process.argv[2] ?? 0);
const SCHEMA = process.env.PEER_SCHEMA ?? 'peer';
if (!/^[a-z_][a-z0-9_]*$/.test(SCHEMA)) throw new Error('PEER_SCHEMA: a lower-case identifier');
const WAIT_MS = Number(process.env.IDEMPOTENCY_WAIT_MS ?? 1000);
const jwtKey = createSecretKey(Buffer.from(process.env.JWT_SECRET ?? '', 'utf8'));
const aesKey = Buffer.from(process.env.RESPONSE_ENCRYPTION_KEY ?? '', 'base64');
if (aesKey.length !== 32) throw new Error('RESPONSE_ENCRYPTION_KEY: 32 bytes, base64');

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.DB_POOL_MAX ?? 10),
});

await pool.query(`
  CREATE SCHEMA IF NOT EXISTS ${SCHEMA};
  CREATE TABLE IF NOT EXISTS ${SCHEMA}.users (
    id bigserial PRIMARY KEY,
    tenant_id text NOT NULL,
    name text NOT NULL,
    age int NOT NULL,
    username text,
    email text,
    role text NOT NULL,
    status text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
  );
  CREATE TABLE IF NOT EXISTS ${SCHEMA}.idempotency_keys (
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    status text NOT NULL DEFAULT 'PROCESSING',
    http_status int,
    response bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id, key)
  );
  -- The contract's create refuses a username or an email (case-insensitive) already taken in the
  -- tenant (409): the same two unique indexes as the service's users table.
  CREATE UNIQUE INDEX IF NOT EXISTS users_tenant_username_key ON ${SCHEMA}.users (tenant_id, username);
  CREATE UNIQUE INDEX IF NOT EXISTS users_tenant_email_key ON ${SCHEMA}.users (tenant_id, lower(email));
`);

const claims = z.object({
  sub: z.string().regex(/^[1-9][0-9]{0,18}$/),
  tid: z.string().regex(/^[A-Za-z0-9_-]{1,36}$/),
  role: z.enum(['admin', 'user']),
  exp: z.number().int(),
});
const createUser = z.strictObject({
  name: z.string().min(1).max(100),
  age: z.number().int().min(0).max(150),
  username: z.string().min(3).max(50).nullish(),
  email: z.email().max(254).nullish(),
  role: z.enum(['admin', 'user']).default('user'),
  status: z.enum(['ACTIVE', 'DISABLED']).default('ACTIVE'),
});
const keySchema = z.string().regex(/^[A-Za-z0-9_.:-]{16,128}$/);

type Answer = { status: number; body: unknown; location?: string };
const fail = (status: number, code: number, message: string): Answer => ({
  status,
  body: { code, message, data: null },
});

function send(res: Response, a: Answer, replayed = false) {
  if (a.location) res.location(a.location);
  if (replayed) res.set('Idempotent-Replayed', 'true');
  if (a.status === 202 || a.status === 503) res.set('Retry-After', '1');
  res.status(a.status).json(a.body);
}

function encrypt(a: Answer): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', aesKey, iv);
  const data = Buffer.concat([c.update(JSON.stringify(a), 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), data]);
}
function decrypt(b: Buffer): Answer {
  const d = createDecipheriv('aes-256-gcm', aesKey, b.subarray(0, 12));
  d.setAuthTag(b.subarray(12, 28));
  return JSON.parse(Buffer.concat([d.update(b.subarray(28)), d.final()]).toString('utf8')) as Answer;
}

type Row = Record<string, unknown>;
// A taken username or email inserts nothing (no error, so a keyed create's transaction goes on and
// stores the 409 like any other answer); which of the two was taken is read only then.
const INSERT_USER = `INSERT INTO ${SCHEMA}.users (tenant_id, name, age, username, email, role, status)
  VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING
  RETURNING id::text, name, age, username, email, role, status, created_at, updated_at`;
const TAKEN = `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${SCHEMA}.users WHERE tenant_id = $1 AND username = $2)
  THEN 'username' ELSE 'email' END AS field`;

async function insertUser(q: pg.Pool | pg.PoolClient, values: unknown[]): Promise<Answer> {
  const { rows } = await q.query(INSERT_USER, values);
  if (rows.length === 1) return created(rows[0]);
  const taken = await q.query(TAKEN, [values[0], values[3]]);
  return fail(409, 40904, `${taken.rows[0].field}: already taken`);
}

function created(row: Row): Answer {
  return {
    status: 201,
    location: `/api/v1/users/${row.id}`,
    body: {
      code: 200,
      message: 'Success',
      data: {
        id: row.id,
        name: row.name,
        age: row.age,
        username: row.username,
        email: row.email,
        role: row.role,
        status: row.status,
        createdAt: (row.created_at as Date).toISOString(),
        updatedAt: (row.updated_at as Date).toISOString(),
      },
    },
  };
}

async function handle(req: Request): Promise<{ answer: Answer; replayed?: boolean }> {
  const m = /^Bearer (.+)$/.exec(req.get('authorization') ?? '');
  if (!m) return { answer: fail(401, 401, 'Authentication required') };
  let who: z.infer<typeof claims>;
  try {
    const parsed = claims.safeParse(jwt.verify(m[1], jwtKey, { algorithms: ['HS256'] }));
    if (!parsed.success) return { answer: fail(401, 401, 'Invalid token claims') };
    who = parsed.data;
  } catch {
    return { answer: fail(401, 401, 'Invalid token') };
  }
  const body = createUser.safeParse(req.body);
  if (!body.success) {
    const issue = body.error.issues[0];
    return { answer: fail(400, 400, `${issue.path.join('.')}: ${issue.message}`) };
  }
  if (who.role !== 'admin') return { answer: fail(403, 403, 'Admin role required') };
  const u = body.data;
  const values = [who.tid, u.name, u.age, u.username ?? null, u.email ?? null, u.role, u.status];
  const rawKey = req.get('idempotency-key');
  if (rawKey === undefined) return { answer: await insertUser(pool, values) };

  const key = keySchema.safeParse(rawKey);
  if (!key.success) return { answer: fail(400, 400, 'Idempotency-Key: 16 to 128 characters') };
  const fingerprint = createHash('sha256')
    .update(JSON.stringify(['POST', '/api/v1/users', Object.entries(u).sort()]))
    .digest('base64');
  const client = await pool.connect();
  let open = false;
  try {
    await client.query(`BEGIN; SET LOCAL lock_timeout = '${Math.max(1, WAIT_MS)}ms'`);
    open = true;
    const claim = await client.query(
      `INSERT INTO ${SCHEMA}.idempotency_keys (tenant_id, user_id, key, fingerprint) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING RETURNING 1`,
      [who.tid, who.sub, key.data, fingerprint],
    );
    if (claim.rowCount === 0) {
      // Someone committed this key first: answer from their record.
      const { rows } = await client.query(
        `SELECT fingerprint, status, response FROM ${SCHEMA}.idempotency_keys WHERE tenant_id = $1 AND user_id = $2 AND key = $3`,
        [who.tid, who.sub, key.data],
      );
      await client.query('ROLLBACK');
      open = false;
      const r = rows[0];
      if (r?.status !== 'COMPLETED') return { answer: fail(202, 202, 'Still processing') };
      if (r.fingerprint !== fingerprint)
        return { answer: fail(409, 40901, 'Idempotency-Key reused with a different request') };
      return { answer: decrypt(r.response as Buffer), replayed: true };
    }
    const answer = await insertUser(client, values);
    await client.query(
      `UPDATE ${SCHEMA}.idempotency_keys SET status = 'COMPLETED', http_status = $4, response = $5
       WHERE tenant_id = $1 AND user_id = $2 AND key = $3`,
      [who.tid, who.sub, key.data, answer.status, encrypt(answer)],
    );
    await client.query('COMMIT');
    open = false;
    return { answer };
  } catch (err) {
    if (open) await client.query('ROLLBACK').catch(() => {});
    // lock_timeout: the same key is in flight in another transaction.
    if ((err as { code?: string }).code === '55P03') return { answer: fail(202, 202, 'Still processing') };
    throw err;
  } finally {
    client.release();
  }
}

const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.use(express.json({ limit: 65536 }));
app.post('/api/v1/users', (req, res) => {
  handle(req).then(
    ({ answer, replayed }) => send(res, answer, replayed),
    () => send(res, fail(503, 503, 'Service unavailable')),
  );
});
// A body express.json could not parse: 400 in the envelope, as the service answers.
app.use((err: { status?: number }, _req: Request, res: Response, next: (e?: unknown) => void) => {
  if (!err || typeof err.status !== 'number' || err.status >= 500) return next(err);
  send(res, fail(err.status, err.status, 'body: malformed JSON'));
});
app.get('/healthz', (_req, res) => {
  res.json({ code: 200, message: 'Success', data: { status: 'ok' } });
});

const server = app.listen(port, '127.0.0.1', () => {
  process.stdout.write(`listening ${port}\n`);
});
server.keepAliveTimeout = 5000;
const stop = () => server.close(() => pool.end().then(() => process.exit(0)));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
