// The recoverer's closure of resumable resources whose key expired (idempotency/effect-expire.ts), on a
// test-only effect: the mechanism knows nothing of refunds, the one product effect that sets
// `closedOnKeyExpiry` (test/refunds/refund-outcomes.test.ts drives that one through the service).
import { expect } from 'chai';
import { sqlRows } from '../../core/sql.js';
import { defineEffect, type EffectDeps, type EffectRow } from '../../idempotency/effect.js';
import { type Closure, closeExpiredResumables } from '../../idempotency/effect-expire.js';
import * as h from '../support/effect-harness.js';
import { sharedServer } from '../support/server.js';
import { idempotencyKey } from '../support/tokens.js';

const TABLE = 'partner_notices';
let partner: Awaited<ReturnType<typeof h.startPartner>>;
let deps: EffectDeps;
/** What the next query answers instead of asking the partner, or what runs after it asked, before it answers (once). */
let nextQuery: 'unknown' | (() => Promise<unknown>) | undefined;
const queried: string[] = [];
/** Holds the next perform before it calls the partner until released (once). */
let held: { entered: () => void; released: Promise<void> } | undefined;
const effect = defineEffect<EffectDeps, string, EffectRow, true>({
  name: 'test.partner-notice',
  downstream: 'Partner',
  failpoints: {},
  ...h.oneRowResource(TABLE, () => deps),
  perform: async (_d, r) => {
    const hold = held;
    held = undefined;
    if (hold) {
      hold.entered();
      await hold.released;
    }
    return partner.perform(r.id);
  },
  query: async (_d, r) => {
    queried.push(r.id);
    const instead = nextQuery;
    nextQuery = undefined;
    if (instead === 'unknown') return { kind: 'unknown' };
    const found = await partner.query(r.id);
    await instead?.();
    return found;
  },
  finalise: (d, lease, r) => h.finishFenced(d, lease, TABLE, "status = 'SENT'", r.id, h.createdReply(r)),
  answer: h.createdReply,
  // Longer than any run: the shared server's recoverer (hourly) never closes these on its own.
  closedOnKeyExpiry: { failureReason: 'NOTICE_KEY_EXPIRED', ttlHours: () => 1_000_000 },
});

/** A notice whose only attempt the partner answered 503: resumable, nothing sent. */
async function resumable(): Promise<string> {
  const id = `n${idempotencyKey()}`;
  partner.nextMode('fail');
  expect((await h.runWith(effect, deps, id, idempotencyKey())).kind).to.equal('failed_retryable');
  return id;
}
/** One round of the closure over keys older than `keyTtlMs`: what became of each notice looked at. */
async function round(keyTtlMs = 0) {
  const results: Record<string, Closure> = {};
  const closed = await closeExpiredResumables(effect, deps, keyTtlMs, 20, {
    onResult: (id, result) => {
      results[id] = result;
    },
  });
  return { closed, results };
}
const row = async (id: string) =>
  (
    await sqlRows(
      deps.sequelize,
      `SELECT status, failure_reason AS "failureReason", resumable_since IS NOT NULL AS resumable FROM ${TABLE} WHERE id = $1`,
      [id],
    )
  )[0];

describe('effects: resumable resources whose key expired are closed by the mechanism, query first (a test-only effect)', () => {
  before(async () => {
    const { services } = await sharedServer();
    deps = { sequelize: services.sequelize, engine: services.idempotency };
    await h.createEffectTable(deps, TABLE);
    await deps.sequelize.query(`ALTER TABLE ${TABLE} ADD COLUMN IF NOT EXISTS failure_reason text,
      ADD COLUMN IF NOT EXISTS created_at timestamptz NOT NULL DEFAULT now()`);
    partner = await h.startPartner();
  });
  beforeEach(async () => {
    await deps.sequelize.query(`DELETE FROM ${TABLE}`);
    nextQuery = undefined;
    held = undefined;
    queried.length = 0;
  });
  after(() => partner.close());

  it('when its key has not yet expired, then it is not looked at; once it has and the partner has nothing, then it is FAILED with the reason, and a resume after that sends nothing', async () => {
    const id = await resumable();
    expect(await round(3_600_000)).to.deep.equal({ closed: 0, results: {} });
    expect(queried).to.deep.equal([]);

    expect(await round()).to.deep.equal({ closed: 1, results: { [id]: 'closed' } });
    expect(queried).to.deep.equal([id]);
    expect(await row(id)).to.deep.equal({
      status: 'FAILED',
      failureReason: 'NOTICE_KEY_EXPIRED',
      resumable: false,
    });
    expect((await h.runWith(effect, deps, id, idempotencyKey())).kind).to.equal('replayed');
    expect(partner.sent.has(id)).to.equal(false);
  });

  it('when the partner cannot answer, then nothing is closed blind and the next round asks again', async () => {
    const id = await resumable();
    nextQuery = 'unknown';
    expect(await round()).to.deep.equal({ closed: 0, results: { [id]: 'unknown' } });
    expect(await row(id)).to.deep.equal({ status: 'PROCESSING', failureReason: null, resumable: true });
    expect(await round()).to.deep.equal({ closed: 1, results: { [id]: 'closed' } });
    expect(queried).to.deep.equal([id, id]);
  });

  it('when the partner did it after all (it answered 503 and sent), then it stays PROCESSING for reconcile and is not asked about again', async () => {
    const id = await resumable();
    partner.sent.set(id, 1);
    expect(await round()).to.deep.equal({ closed: 0, results: { [id]: 'done' } });
    expect(await round()).to.deep.equal({ closed: 0, results: {} });
    expect(queried).to.deep.equal([id]);
    expect(await row(id)).to.deep.equal({ status: 'PROCESSING', failureReason: null, resumable: true });
  });

  it('when a resume takes the mark between the query and the closing statement, then the closure leaves it to the resume, in flight: sent once, SENT, not closed', async () => {
    const id = await resumable();
    let entered = () => {};
    const inPerform = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let release = () => {};
    held = { entered, released: new Promise<void>((resolve) => (release = resolve)) };
    let resume: ReturnType<typeof h.runWith> | undefined;
    nextQuery = async () => {
      resume = h.runWith(effect, deps, id, idempotencyKey());
      await inPerform; // the resume holds the mark and is at the partner
    };
    expect(await round()).to.deep.equal({ closed: 0, results: { [id]: 'moved' } });
    expect(await row(id)).to.deep.equal({ status: 'PROCESSING', failureReason: null, resumable: false });
    release();
    expect((await resume)?.kind).to.equal('executed');
    expect(await row(id)).to.deep.equal({ status: 'SENT', failureReason: null, resumable: false });
    expect(partner.sent.get(id)).to.equal(1);
  });
});
