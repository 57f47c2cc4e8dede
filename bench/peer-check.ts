import { randomUUID } from 'node:crypto';
import type pg from 'pg';

/** What proving the peer found (kept in the run's results). */
export interface PeerProof {
  replay: string;
  mismatch: string;
  concurrent: { answers: Record<string, number>; rows: number };
  taken: string;
  /** What the caller's row did (absent for the token-only peer, which does not read it). */
  userRow?: string;
}

/** Signs a token of the run's tenant for a user id and role. */
export type TokenFor = (userId: string, role: 'admin' | 'user') => string;

interface Sent {
  status: number;
  replayed: boolean;
  body: { code?: number; data?: { id?: string } | null };
}

async function post(url: string, token: string, key: string | undefined, body: object): Promise<Sent> {
  const res = await fetch(`${url}/api/v1/users`, {
    method: 'POST',
    headers: {
      authorization: token,
      'content-type': 'application/json',
      ...(key ? { 'idempotency-key': key } : {}),
    },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    replayed: res.headers.get('idempotent-replayed') === 'true',
    body: (await res.json()) as Sent['body'],
  };
}

/**
 * The peer must be correct before its speed means anything: a replay replays (same user, marked),
 * another body under the key is 409 40901, 16 concurrent duplicates create one row, and a username
 * already taken is 409 40904 as in the service, with or without a key (then replayed as such). With
 * `rowCheck`, the caller's user row too (proveUserRow). Throws, naming what failed, otherwise returns
 * what it saw.
 */
export async function provePeer(
  url: string,
  token: string,
  sql: pg.Pool,
  options: { schema: string; rowCheck?: { tenant: string; tokenFor: TokenFor } },
): Promise<PeerProof> {
  const { schema } = options;
  const fail = failure(schema);
  const key = `peer-proof-${randomUUID()}`;
  const body = { name: `peer-proof-${randomUUID().slice(0, 8)}`, age: 30 };
  const first = await post(url, token, key, body);
  if (first.status !== 201 || !first.body.data?.id) fail(`first create answered ${first.status}`);
  const again = await post(url, token, key, body);
  if (again.status !== 201 || !again.replayed || again.body.data?.id !== first.body.data?.id)
    fail(`the retry answered ${again.status} (replayed ${again.replayed}, id ${again.body.data?.id})`);
  const other = await post(url, token, key, { ...body, age: 31 });
  if (other.status !== 409 || other.body.code !== 40901)
    fail(`another body under the key answered ${other.status}/${other.body.code}`);

  const stormKey = `peer-storm-${randomUUID()}`;
  const stormBody = { name: `peer-storm-${randomUUID().slice(0, 8)}`, age: 40 };
  const answers: Record<string, number> = {};
  const storm = await Promise.all(Array.from({ length: 16 }, () => post(url, token, stormKey, stormBody)));
  for (const s of storm) answers[s.status] = (answers[s.status] ?? 0) + 1;
  if (storm.some((s) => s.status !== 201 && s.status !== 202))
    fail(`a concurrent duplicate answered ${JSON.stringify(answers)}`);
  const ids = new Set(storm.filter((s) => s.status === 201).map((s) => s.body.data?.id));
  if (ids.size !== 1) fail(`concurrent duplicates answered ${ids.size} different users`);
  const { rows } = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${schema}.users WHERE name = $1`,
    [stormBody.name],
  );
  if (rows[0]?.n !== 1) fail(`16 concurrent duplicates made ${rows[0]?.n} rows`);

  const username = `peer-${randomUUID().slice(0, 12)}`;
  const owner = await post(url, token, undefined, { name: 'taken', age: 20, username });
  if (owner.status !== 201) fail(`a create with a new username answered ${owner.status}`);
  const twice = await post(url, token, undefined, { name: 'taken again', age: 21, username });
  if (twice.status !== 409 || twice.body.code !== 40904)
    fail(`a taken username without a key answered ${twice.status}/${twice.body.code}`);
  const takenKey = `peer-taken-${randomUUID()}`;
  const keyed = await post(url, token, takenKey, { name: 'taken keyed', age: 22, username });
  const retried = await post(url, token, takenKey, { name: 'taken keyed', age: 22, username });
  if (keyed.status !== 409 || keyed.body.code !== 40904 || retried.status !== 409 || !retried.replayed)
    fail(`a taken username with a key answered ${keyed.status}/${keyed.body.code}, then ${retried.status}`);
  return {
    replay: `201 replayed, same id ${first.body.data?.id}`,
    mismatch: '409 40901',
    concurrent: { answers, rows: rows[0].n },
    taken: '409 40904, with a key replayed',
    userRow: options.rowCheck ? await proveUserRow(url, sql, schema, options.rowCheck) : undefined,
  };
}

function failure(schema: string) {
  return (what: string): never => {
    throw new Error(`the hand-written peer (${schema}) is not correct: ${what}`);
  };
}

/**
 * The caller's row decides as the contract says: a DISABLED admin's token is 403 with and without a
 * key and writes nothing (no user, no key record); a row demoted to user refuses an admin token; a row
 * promoted to admin admits a user token; a key answered before its user was disabled is 403, not
 * replayed.
 */
async function proveUserRow(
  url: string,
  sql: pg.Pool,
  schema: string,
  { tenant, tokenFor }: { tenant: string; tokenFor: TokenFor },
): Promise<string> {
  const fail = failure(schema);
  const row = async (role: string, status: string) => {
    const { rows } = await sql.query<{ id: string }>(
      `INSERT INTO ${schema}.users (tenant_id, name, age, role, status) VALUES ($1, 'peer caller', 40, $2, $3)
       RETURNING id::text`,
      [tenant, role, status],
    );
    return rows[0].id;
  };
  const written = async (name: string, userId: string) => {
    const { rows } = await sql.query<{ users: number; keys: number }>(
      `SELECT (SELECT count(*)::int FROM ${schema}.users WHERE name = $1) AS users,
              (SELECT count(*)::int FROM ${schema}.idempotency_keys WHERE tenant_id = $2 AND user_id = $3) AS keys`,
      [name, tenant, userId],
    );
    return rows[0];
  };

  const disabled = await row('admin', 'DISABLED');
  const name = `peer-disabled-${randomUUID().slice(0, 8)}`;
  for (const key of [undefined, `peer-disabled-${randomUUID()}`]) {
    const a = await post(url, tokenFor(disabled, 'admin'), key, { name, age: 30 });
    if (a.status !== 403)
      fail(`a DISABLED admin's token ${key ? 'with' : 'without'} a key answered ${a.status}`);
  }
  const left = await written(name, disabled);
  if (left.users !== 0 || left.keys !== 0)
    fail(`a DISABLED admin's refused creates wrote ${left.users} users, ${left.keys} key records`);

  const demoted = await row('user', 'ACTIVE');
  const d = await post(url, tokenFor(demoted, 'admin'), undefined, { name: 'peer demoted', age: 30 });
  if (d.status !== 403) fail(`an admin token whose row is a user answered ${d.status}`);
  const promoted = await row('admin', 'ACTIVE');
  const p = await post(url, tokenFor(promoted, 'user'), undefined, { name: 'peer promoted', age: 30 });
  if (p.status !== 201) fail(`a user token whose row is an admin answered ${p.status}`);

  const key = `peer-later-${randomUUID()}`;
  const body = { name: `peer-later-${randomUUID().slice(0, 8)}`, age: 30 };
  const before = await post(url, tokenFor(promoted, 'user'), key, body);
  await sql.query(`UPDATE ${schema}.users SET status = 'DISABLED' WHERE id = $1`, [promoted]);
  const after = await post(url, tokenFor(promoted, 'user'), key, body);
  if (before.status !== 201 || after.status !== 403)
    fail(`a key answered ${before.status} before its user was disabled, then ${after.status} (not 403)`);
  return 'DISABLED: 403 with and without a key, nothing written; the row role wins over the token role; a replay after disabling: 403';
}
