// Reusable parts for test-only effects (idempotency/effect.ts): a fake partner over loopback HTTP, the
// request the router would build, and a fenced finalise of a one-table resource. What stays in a test
// is the effect's own definition (test/idempotency/effect-partner.test.ts).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Transaction } from 'sequelize';
import { sqlLiteral, sqlRows } from '../../core/sql.js';
import type {
  AnyEffect,
  Downstream,
  EffectDeps,
  EffectRow,
  Lease,
  Prepared,
} from '../../idempotency/effect.js';
import { runEffect } from '../../idempotency/effect-run.js';
import type { IdempotentRequest } from '../../idempotency/engine.js';
import type { Reply } from '../../idempotency/outcome.js';

export type PartnerMode = 'ok' | 'fail' | 'lose';

/**
 * A partner that ignores keys (a second send counts 2): POST /{id} sends (201), or for one request
 * answers 503 without sending ('fail'), or sends and loses the answer ('lose': a reset after it
 * acted); GET /{id} answers 200 once sent, else 404.
 */
export async function startPartner() {
  const sent = new Map<string, number>();
  let next: PartnerMode = 'ok';
  const server = createServer((req, res) => {
    const id = (req.url ?? '').slice(1);
    if (req.method === 'GET') return res.writeHead(sent.has(id) ? 200 : 404).end();
    const mode = next;
    next = 'ok';
    if (mode === 'fail') return res.writeHead(503).end();
    sent.set(id, (sent.get(id) ?? 0) + 1);
    if (mode === 'lose') return req.socket.destroy();
    res.writeHead(201).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const call = (method: 'GET' | 'POST', id: string) =>
    fetch(`${url}/${id}`, { method }).then(
      (r) => r.status,
      () => 0,
    );
  return {
    sent,
    /** The next POST's behaviour. */
    nextMode: (mode: PartnerMode) => {
      next = mode;
    },
    /** An effect's perform: sent (201), certainly not (503), or unknown (no answer). */
    perform: async (id: string): Promise<Downstream<true>> => {
      const status = await call('POST', id);
      if (status === 201) return { kind: 'done', result: true };
      return { kind: status === 503 ? 'not_done' : 'unknown' };
    },
    /** An effect's query: sent (200) or not (404). */
    query: async (id: string): Promise<Downstream<true>> =>
      (await call('GET', id)) === 200 ? { kind: 'done', result: true } : { kind: 'not_done' },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The request routers/ would build for `operation` with this key (one test tenant and user). */
export const effectRequest = (operation: string, key: string, requestHash: string): IdempotentRequest => ({
  scopeKey: `t:p:${operation}:${key}`,
  requestHash,
  userScope: 't:p',
  operation,
  ttlHours: 1,
});

/** Tx 2 of a one-table resource, fenced on the lease: `set` applies to row `id` only if the record was ours. */
export async function finishFenced(
  deps: EffectDeps,
  lease: Lease,
  table: string,
  set: string,
  id: string,
  reply: Reply,
): Promise<Reply | undefined> {
  const parts = deps.engine.leases.finishParts(lease, 'SUCCEEDED', reply);
  const written = await sqlRows<{ n: number }>(
    deps.sequelize,
    `WITH ${parts.ctes}, w AS (UPDATE ${table} SET ${set}, resumable_since = NULL
     WHERE id = $6 AND EXISTS (SELECT 1 FROM done) RETURNING 1) ${parts.select}`,
    [...parts.bind, id],
  );
  return Number(written[0]?.n) === 1 ? reply : undefined;
}

/** A resource table with the columns the mechanism needs (EffectRow) and a text status. */
export async function createEffectTable(deps: EffectDeps, table: string): Promise<void> {
  await deps.sequelize.query(`CREATE TABLE IF NOT EXISTS ${table} (id text PRIMARY KEY,
    status text NOT NULL DEFAULT 'PROCESSING', resumable_since timestamptz, updated_at timestamptz NOT NULL DEFAULT now())`);
}

/** The statement reading a resource row (EffectRow's columns) of `table` by id. */
export const selectRow = (table: string) =>
  `SELECT id, status, resumable_since AS "resumableSince" FROM ${table} WHERE id =`;

/** A resource row of `table`, or undefined. */
export const readRow = async (deps: EffectDeps, table: string, id: string): Promise<EffectRow | undefined> =>
  (await sqlRows<EffectRow & { status: string }>(deps.sequelize, `${selectRow(table)} $1`, [id]))[0];

/** The one-row resource's 201 answer: its id (the answer replayed to every later request of the key). */
export const createdReply = (r: EffectRow) => ({ status: 201, headers: {}, body: { id: r.id } });

/**
 * The parts of a definition whose resource is one row of `table` with the request's input as its id:
 * the lookup in the claim's round trip, prepare (that row if there, else a new one) and read.
 */
export const oneRowResource = (table: string, deps: () => EffectDeps) => ({
  table,
  lookup: (id: string) => `${selectRow(table)} ${sqlLiteral(id)};`,
  prepare: (_t: Transaction, [found]: unknown[], id: string): Prepared<EffectRow> =>
    found
      ? { kind: 'existing', row: found as EffectRow }
      : {
          kind: 'new',
          row: { id, status: 'PROCESSING', resumableSince: null },
          insert: `INSERT INTO ${table} (id) VALUES (${sqlLiteral(id)});`,
        },
  read: (id: string) => readRow(deps(), table, id),
});

/** One request for the effect with this input, as its router entry would send it (a new key by default). */
export const runWith = (effect: AnyEffect, deps: EffectDeps, input: string, key: string) =>
  runEffect(effect, deps, effectRequest(effect.name, key, input), input, () => ({
    status: 400,
    headers: {},
    body: null,
  }));
