// Issue 27, Tests: "each defect that the mechanism makes impossible for payments is put back in a
// test-only effect and caught (say which check catches it)". The effect is the partner message of
// effect-partner.test.ts; each defect is put back by overriding one function of its definition (the
// mechanism, idempotency/effect-*.ts, is untouched), and each test shows that its check passes on the
// correct definition and fails on the broken one.
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { sqlLiteral } from '../../core/sql.js';
import {
  type AnyEffect,
  defineEffect,
  type Effect,
  type EffectDeps,
  type EffectRow,
} from '../../idempotency/effect.js';
import { sweepExpired } from '../../idempotency/effect-recover.js';
import type { Lease } from '../../idempotency/lease.js';
import * as h from '../support/effect-harness.js';
import { sharedServer } from '../support/server.js';
import { idempotencyKey } from '../support/tokens.js';

const TABLE = 'partner_defect_messages';
let partner: Awaited<ReturnType<typeof h.startPartner>>;
let deps: EffectDeps;

type Row = EffectRow & { finalisedBy?: string | null };
type Definition = Effect<EffectDeps, string, Row, true>;
const reply = (r: Row, by: string) => ({ status: 201, headers: {}, body: { id: r.id, by } });
const sql = (text: string, bind: unknown[]) => deps.sequelize.query(text, { bind, type: QueryTypes.UPDATE });

/** The correct definition (as effect-partner.test.ts), its finalise also recording whose lease wrote the row. */
function correct(name: string): Definition {
  return {
    name,
    table: TABLE,
    downstream: 'Partner',
    failpoints: {},
    lookup: (id) =>
      `SELECT id, status, resumable_since AS "resumableSince" FROM ${TABLE} WHERE id = ${sqlLiteral(id)};`,
    prepare: (_t, [found], id) =>
      found
        ? { kind: 'existing', row: found as Row }
        : {
            kind: 'new',
            row: { id, status: 'PROCESSING', resumableSince: null },
            insert: `INSERT INTO ${TABLE} (id) VALUES (${sqlLiteral(id)});`,
          },
    read: async (id) =>
      (
        await deps.sequelize.query<Row>(
          `SELECT id, status, resumable_since AS "resumableSince", finalised_by AS "finalisedBy" FROM ${TABLE} WHERE id = $1`,
          { bind: [id], type: QueryTypes.SELECT },
        )
      )[0],
    perform: (_d, r) => partner.perform(r.id),
    query: (_d, r) => partner.query(r.id),
    finalise: (d, lease, r) =>
      h.finishFenced(
        d,
        lease,
        TABLE,
        `status = 'SENT', finalised_by = ${sqlLiteral(lease.owner)}`,
        r.id,
        reply(r, lease.owner),
      ),
    answer: (r) => reply(r, String(r.finalisedBy)),
  };
}

let variants = 0;
/** A definition under a name of its own (the registry sweeps each): the correct one, or with `broken` over it. */
const variant = (broken: Partial<Definition> = {}): AnyEffect =>
  defineEffect({ ...correct(`test.defect-${++variants}`), ...broken });

const send = (effect: AnyEffect, id: string, key = idempotencyKey()) => h.runWith(effect, deps, id, key);
const newId = () => `d${idempotencyKey()}`;
/** How many messages the partner took for resource `id`, under its key or any key derived from it. */
const sends = (id: string) =>
  [...partner.sent].filter(([k]) => k === id || k.startsWith(`${id}~`)).reduce((n, [, c]) => n + c, 0);
const row = async (id: string) =>
  (
    await deps.sequelize.query<{ status: string; finalisedBy: string | null }>(
      `SELECT status, finalised_by AS "finalisedBy" FROM ${TABLE} WHERE id = $1`,
      { bind: [id], type: QueryTypes.SELECT },
    )
  )[0];
/** Ends the lease of the resource's record now (as if its executor had been gone for a lease). */
const expireLease = (id: string) =>
  sql(`UPDATE idempotency_records SET lease_until = now() - interval '1 second' WHERE resource_id = $1`, [
    id,
  ]);
/** The recoverer's round (ours, or the server's own, whichever comes first), until the row is final. */
async function recovered(effect: AnyEffect, id: string) {
  for (let round = 0; round < 200 && (await row(id))?.status === 'PROCESSING'; round++) {
    await sweepExpired(effect, deps, 1000);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

// --- the checks: each returns what is wrong, or undefined ---------------------------------------------
/** The partner's ledger: one message per resource, whatever crashed or was lost. */
const ledgerCheck = (id: string) => (sends(id) === 1 ? undefined : `the partner took ${sends(id)} messages`);
/** The fencing check: the row was written by the lease whose answer the key stores (one writer). */
async function fencingCheck(effect: AnyEffect, id: string, key: string) {
  const stored = await send(effect, id, key);
  const by = stored.kind === 'replayed' ? (stored.reply.body as { by?: string }).by : `(${stored.kind})`;
  const written = (await row(id))?.finalisedBy;
  return written === by ? undefined : `the row was finalised by ${written}, the key's stored answer by ${by}`;
}
/** The no-stranded check: once the client came back (a new key) and the recoverer ran, nothing is PROCESSING. */
async function strandedCheck(effect: AnyEffect, id: string) {
  await send(effect, id);
  await sweepExpired(effect, deps, 1000);
  const status = (await row(id))?.status;
  return status === 'SENT' ? undefined : `the message is still ${status} after its client came back`;
}

// --- the scenarios: the same faults for the correct and the broken definition -------------------------
/** The process dies between perform and finalise; the recoverer takes over (query first). */
async function crashAfterPerform(broken: Partial<Definition>) {
  let crashes = 1;
  const base = correct('unused');
  const effect = variant({
    finalise: (d, lease, r, result) => {
      if (crashes-- > 0) throw new Error('the process died between perform and finalise');
      return base.finalise(d, lease, r, result);
    },
    ...broken,
  });
  const id = newId();
  await send(effect, id).then(
    () => expect.fail('finalise should have thrown'),
    () => {},
  );
  await expireLease(id);
  await recovered(effect, id);
  return ledgerCheck(id);
}

/** The partner acts but its answer is lost (unknown). */
async function lostAnswer(broken: Partial<Definition>) {
  const effect = variant(broken);
  const id = newId();
  partner.nextMode('lose');
  await send(effect, id);
  await expireLease(id);
  await recovered(effect, id);
  return ledgerCheck(id);
}

/** The executor stalls before its finalise past its lease; the recoverer takes over and finalises first. */
async function staleExecutor(broken: (base: Definition) => Partial<Definition>) {
  let reached: () => void = () => {};
  const atFinalise = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let go: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    go = resolve;
  });
  let calls = 0;
  const base = correct('unused');
  const finalise = broken(base).finalise ?? base.finalise;
  const effect = variant({
    finalise: async (d, lease: Lease, r, result) => {
      if (calls++ === 0) {
        reached();
        await gate;
      }
      return finalise(d, lease, r, result);
    },
  });
  const id = newId();
  const key = idempotencyKey();
  const stale = send(effect, id, key);
  await atFinalise;
  await expireLease(id);
  await recovered(effect, id);
  go();
  await stale;
  return fencingCheck(effect, id, key);
}

/** The partner certainly did nothing (503); the client comes back later with a new key. */
async function certainlyNotDone(broken: Partial<Definition>) {
  const effect = variant(broken);
  const id = newId();
  partner.nextMode('fail');
  expect((await send(effect, id)).kind).to.equal('failed_retryable');
  return strandedCheck(effect, id);
}

describe('effects: each defect the mechanism rules out, put back in a test-only effect, is caught', () => {
  before(async () => {
    const { services } = await sharedServer();
    deps = { sequelize: services.sequelize, engine: services.idempotency };
    await h.createEffectTable(deps, TABLE);
    await deps.sequelize.query(`ALTER TABLE ${TABLE} ADD COLUMN IF NOT EXISTS finalised_by text`);
    partner = await h.startPartner();
  });
  after(() => partner.close());

  it('(a) when perform uses a new downstream key per attempt (none stable), then after a crash and a takeover the partner ledger check catches the double message', async () => {
    expect(await crashAfterPerform({})).to.equal(undefined);
    // Each call makes up its own key: the takeover's query asks about a key nobody sent, so it sends again.
    let attempt = 0;
    const newKeyEachTime: Partial<Definition> = {
      perform: (_d, r) => partner.perform(`${r.id}~${++attempt}`),
      query: (_d, r) => partner.query(`${r.id}~${++attempt}`),
    };
    expect(await crashAfterPerform(newKeyEachTime)).to.equal('the partner took 2 messages');
  });

  it('(b) when finalise is not fenced on the owner token, then a stale executor overwrites the row after a takeover and the fencing check catches it', async () => {
    expect(await staleExecutor(() => ({}))).to.equal(undefined);
    // Writes the row whatever the record says, then claims success even when the record's update was fenced off.
    const unfenced = (): Partial<Definition> => ({
      finalise: async (d, lease, r) => {
        await sql(
          `UPDATE ${TABLE} SET status = 'SENT', finalised_by = $2, resumable_since = NULL WHERE id = $1`,
          [r.id, lease.owner],
        );
        const answer = reply(r, lease.owner);
        return (
          (await h.finishFenced(
            d,
            lease,
            TABLE,
            `finalised_by = ${sqlLiteral(lease.owner)}`,
            r.id,
            answer,
          )) ?? answer
        );
      },
    });
    expect(await staleExecutor(unfenced)).to.match(
      /^the row was finalised by .+, the key's stored answer by .+/,
    );
  });

  it('(c) when a lost answer is re-sent without asking the partner first, then the partner ledger check catches the duplicate', async () => {
    expect(await lostAnswer({})).to.equal(undefined);
    // An HTTP client's "retry on reset": the request may have arrived, and it is sent again blind.
    const blindRetry: Partial<Definition> = {
      perform: async (_d, r) => {
        const first = await partner.perform(r.id);
        return first.kind === 'unknown' ? partner.perform(r.id) : first;
      },
    };
    expect(await lostAnswer(blindRetry)).to.equal('the partner took 2 messages');
  });

  it('(d) when a certainly-not-done attempt leaves its resource PROCESSING without the resumable mark, then the no-stranded check catches it', async () => {
    expect(await certainlyNotDone({})).to.equal(undefined);
    // The lookup drops resumable_since: the mark is on the row, but the next request never sees it
    // (the resource looks in flight: 202 forever), and the recoverer has no PROCESSING record to take.
    const markLost: Partial<Definition> = {
      lookup: (id) => `SELECT id, status FROM ${TABLE} WHERE id = ${sqlLiteral(id)};`,
    };
    expect(await certainlyNotDone(markLost)).to.equal(
      'the message is still PROCESSING after its client came back',
    );
  });
});
