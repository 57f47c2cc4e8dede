/**
 * The hand-written peer: what a competent engineer writes in an afternoon instead of this service,
 * answering `POST /api/v1/users` with the same envelope, status and Location. The benchmark runs it
 * as a separate process next to the service, on the same database (tables in a schema of their
 * own), with the same pool size, tokens and bodies, and proves it correct before measuring it
 * (bench/peer-check.ts).
 *
 * - Express 5, `pg` Pool (max = DB_POOL_MAX), jsonwebtoken (HS256 with a cached KeyObject, `exp`
 *   required, `sub` and `tid` format checked), zod (strict body; a 400 in the envelope).
 * - The caller's user row (CONTRACT section 4), as the service checks it: the row of the token's
 *   `sub` in its tenant decides (DISABLED → 403; this admin-only create needs its role admin), else
 *   the token's role. Checked inside the write (`PEER_USER_CHECK=row`, the default, as the service's
 *   `user_insert_checked`), or from the token's role alone (`token`, reported beside it).
 * - Without a key: one `INSERT ... SELECT ... ON CONFLICT DO NOTHING RETURNING` (a username or email
 *   already taken in the tenant is a 409, as in the service: the same two unique indexes).
 * - With `Idempotency-Key`: one transaction: `BEGIN` + `SET LOCAL lock_timeout`, the key's `INSERT
 *   ... ON CONFLICT DO NOTHING RETURNING` (a duplicate in flight waits on the key, bounded), on
 *   conflict a read of the record and the user row: 403 for a refused caller, else the stored answer
 *   replayed, 409 for another body, 202 while in flight; else the user's checked `INSERT` (a refused
 *   caller: `ROLLBACK`, 403, nothing written), the key's final `UPDATE` (answer AES-256-GCM), `COMMIT`.
 *
 * Usage: node --import tsx bench/peer.ts <port>   (env: DATABASE_URL, DB_POOL_MAX, JWT_SECRET,
 * RESPONSE_ENCRYPTION_KEY (base64, 32 bytes), PEER_SCHEMA (default peer), PEER_USER_CHECK (row |
 * token, default row), IDEMPOTENCY_WAIT_MS)
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
const ROW_CHECK = (process.env.PEER_USER_CHECK ?? 'row') === 'row';
if (!['row', 'token', undefined].includes(process.env.PEER_USER_CHECK))
  throw new Error('PEER_USER_CHECK: row|token');
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
const RETURNING = 'id::text, name, age, username, email, role, status, created_at, updated_at';
// A taken username or email inserts nothing (no error, so a keyed create's transaction goes on and
// stores the 409 like any other answer); which of the two was taken is read only then.
const INSERT_USER = `INSERT INTO ${SCHEMA}.users (tenant_id, name, age, username, email, role, status)
  VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING ${RETURNING}`;
// The caller's verdict from its row (another tenant's row is no row): 'DISABLED', its role, or,
// without a row, the token's role. Parameters: the tenant is $1; `sub` and `role` name the others.
const acting = (sub: string, role: string) => `coalesce((SELECT CASE WHEN u.status = 'DISABLED'
  THEN 'DISABLED' ELSE u.role END FROM ${SCHEMA}.users u WHERE u.id = ${sub}::bigint AND u.tenant_id = $1), ${role})`;
// The same INSERT, writing only when the verdict admits an admin-only create, in the same statement
// (no window between the check and the write); the verdict comes back with the row (or alone).
const INSERT_USER_CHECKED = `WITH caller AS (SELECT ${acting('$8', '$9')} AS acting),
  ins AS (INSERT INTO ${SCHEMA}.users (tenant_id, name, age, username, email, role, status)
    SELECT $1, $2, $3::int, $4, $5, $6, $7 FROM caller WHERE acting = 'admin'
    ON CONFLICT DO NOTHING RETURNING ${RETURNING})
  SELECT caller.acting, ins.* FROM caller LEFT JOIN ins ON true`;
const TAKEN = `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${SCHEMA}.users WHERE tenant_id = $1 AND username = $2)
  THEN 'username' ELSE 'email' END AS field`;

/** 403 for a verdict that does not admit an admin-only create; undefined when it does. */
function refusal(acting: unknown): Answer | undefined {
  if (acting === 'DISABLED') return fail(403, 403, 'User is disabled');
  if (acting !== 'admin') return fail(403, 403, 'Admin role required');
  return undefined;
}

/** The create's answer; `refused` (nothing written) when the caller's row does not admit it. */
async function insertUser(
  q: pg.Pool | pg.PoolClient,
  values: unknown[],
  who: { sub: string; role: string },
): Promise<Answer & { refused?: boolean }> {
  let row: Row | undefined;
  if (ROW_CHECK) {
    const { rows } = await q.query(INSERT_USER_CHECKED, [...values, who.sub, who.role]);
    const refused = refusal(rows[0].acting);
    if (refused) return { ...refused, refused: true };
    if (rows[0].id !== null) row = rows[0];
  } else {
    row = (await q.query(INSERT_USER, values)).rows[0];
  }
  if (row) return created(row);
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
  if (!ROW_CHECK && who.role !== 'admin') return { answer: fail(403, 403, 'Admin role required') };
  const u = body.data;
  const values = [who.tid, u.name, u.age, u.username ?? null, u.email ?? null, u.role, u.status];
  const rawKey = req.get('idempotency-key');
  if (rawKey === undefined) {
    const { refused: _, ...answer } = await insertUser(pool, values, who);
    return { answer };
  }

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
      // Someone committed this key first: answer from their record, if the caller's row still admits
      // it (a user disabled since its first request gets 403, not the stored answer).
      const { rows } = await client.query(
        ROW_CHECK
          ? `SELECT k.fingerprint, k.status, k.response, ${acting('$5', '$4')} AS acting
             FROM ${SCHEMA}.idempotency_keys k WHERE k.tenant_id = $1 AND k.user_id = $2 AND k.key = $3`
          : `SELECT fingerprint, status, response FROM ${SCHEMA}.idempotency_keys WHERE tenant_id = $1 AND user_id = $2 AND key = $3`,
        // The id again as $5: $2 is the record's text column, and a parameter has one type.
        ROW_CHECK ? [who.tid, who.sub, key.data, who.role, who.sub] : [who.tid, who.sub, key.data],
      );
      await client.query('ROLLBACK');
      open = false;
      const r = rows[0];
      const refused = ROW_CHECK && r ? refusal(r.acting) : undefined;
      if (refused) return { answer: refused };
      if (r?.status !== 'COMPLETED') return { answer: fail(202, 202, 'Still processing') };
      if (r.fingerprint !== fingerprint)
        return { answer: fail(409, 40901, 'Idempotency-Key reused with a different request') };
      return { answer: decrypt(r.response as Buffer), replayed: true };
    }
    const { refused, ...answer } = await insertUser(client, values, who);
    if (refused) {
      // Nothing of a refused request is kept, the key's claim included (as the service).
      await client.query('ROLLBACK');
      open = false;
      return { answer };
    }
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
