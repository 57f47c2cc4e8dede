import { randomUUID } from 'node:crypto';
import type pg from 'pg';

/** What proving the peer found (kept in the run's results). */
export interface PeerProof {
  replay: string;
  mismatch: string;
  concurrent: { answers: Record<string, number>; rows: number };
  taken: string;
}

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
 * already taken is 409 40904 as in the service, with or without a key (then replayed as such). Throws,
 * naming what failed, otherwise returns what it saw.
 */
export async function provePeer(
  url: string,
  token: string,
  sql: pg.Pool,
  schema = 'peer',
): Promise<PeerProof> {
  const fail = (what: string): never => {
    throw new Error(`the hand-written peer is not correct: ${what}`);
  };
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
  };
}
