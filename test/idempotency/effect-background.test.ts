// The background effect mechanism (idempotency/effect-background.ts) on a test-only definition that
// knows nothing of exports: "copy the numbers 1..total into a sink, `size` a part". The sink's
// primary key refuses a number twice, so a part written twice fails loudly; the file-level checks of
// exports (test/exports/) run the same mechanism through real processes.
import { expect } from 'chai';
import type { Sequelize } from 'sequelize';
import { sqlRows } from '../../core/sql.js';
import {
  type BackgroundDeps,
  defineBackgroundEffect,
  registeredBackgroundEffects,
  runBackground,
} from '../../idempotency/effect-background.js';
import { sharedServer } from '../support/server.js';

const TABLE = 'test_copy_tasks';
interface Row {
  id: string;
  total: number;
  copied: number;
  partsWritten: number;
}
type Deps = BackgroundDeps & { size: number; onPart?: () => Promise<void> };

let sequelize: Sequelize;
const q = <R extends object>(text: string, values: unknown[] = []) => sqlRows<R>(sequelize, text, values);

/** The whole definition: its row, its next part, its refusal, its final figures. */
const copy = defineBackgroundEffect<Deps, Row>({
  name: 'test-copy',
  table: TABLE,
  failpoints: {},
  read: async (d, lease) =>
    (
      await sqlRows<Row>(
        d.sequelize,
        `SELECT id::text, total, copied, parts_written AS "partsWritten" FROM ${TABLE} WHERE id = $1 AND lease_owner = $2`,
        [lease.id, lease.owner],
      )
    )[0],
  refusal: async (_d, row) => (row.total > 1000 ? 'TOO_BIG' : undefined),
  async nextPart(d, row) {
    await d.onPart?.();
    const n = Math.min(d.size, row.total - row.copied);
    if (n === 0) return undefined;
    return {
      checkpoint: 'copied = copied + $1',
      values: [n],
      save: (t) =>
        sqlRows(
          d.sequelize,
          'INSERT INTO test_copy_sink SELECT $1, g FROM generate_series($2::int, $3::int) g',
          [row.id, row.copied + 1, row.copied + n],
          t,
        ),
      after: { ...row, copied: row.copied + n, partsWritten: row.partsWritten + 1 },
      last: row.copied + n === row.total,
    };
  },
  succeeded: () => ({ set: 'total = copied', values: [] }),
});

async function newTask(total: number): Promise<string> {
  const [row] = await q<{ id: string }>(`INSERT INTO ${TABLE} (total) VALUES ($1) RETURNING id::text`, [
    total,
  ]);
  return row.id;
}
const task = async (id: string) =>
  (
    await q<{ status: string; failure: string | null; owner: string | null }>(
      `SELECT status, failure_reason AS failure, lease_owner AS owner FROM ${TABLE} WHERE id = $1`,
      [id],
    )
  )[0];
const sink = async (id: string) =>
  (
    await q<{ n: number; distinct: number; max: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT k)::int AS distinct, coalesce(max(k), 0) AS max FROM test_copy_sink WHERE task = $1',
      [id],
    )
  )[0];
const deps = (extra: Partial<Deps> = {}): Deps => ({ sequelize, leaseMs: 5000, size: 10, ...extra });

describe('background effects: the mechanism on a test-only definition (copy numbers in parts)', () => {
  before(async () => {
    ({ sequelize } = (await sharedServer()).services);
    await q(`CREATE TABLE IF NOT EXISTS ${TABLE} (id bigserial PRIMARY KEY, status text NOT NULL DEFAULT 'PROCESSING',
      total int NOT NULL, copied int NOT NULL DEFAULT 0, parts_written int NOT NULL DEFAULT 0, failure_reason text,
      completed_at timestamptz, lease_owner text, lease_until timestamptz, updated_at timestamptz)`);
    await q('CREATE TABLE IF NOT EXISTS test_copy_sink (task bigint, k int, PRIMARY KEY (task, k))');
  });

  it('when a definition is declared, then it is registered for the job runner and the recoverer', () => {
    expect(registeredBackgroundEffects()).to.include(copy);
  });

  it('when it runs, then every number is copied once, part by part, and the row is SUCCEEDED without a lease', async () => {
    const id = await newTask(95);
    expect(await runBackground(copy, deps(), id)).to.equal('succeeded');
    expect(await sink(id)).to.deep.equal({ n: 95, distinct: 95, max: 95 });
    expect(await task(id)).to.deep.include({ status: 'SUCCEEDED', owner: null });
  });

  it('when the definition refuses before the first part, then the row is FAILED with its reason and nothing is copied', async () => {
    const id = await newTask(5000);
    expect(await runBackground(copy, deps(), id)).to.equal('failed');
    expect(await task(id)).to.deep.include({ status: 'FAILED', failure: 'TOO_BIG' });
    expect((await sink(id)).n).to.equal(0);
  });

  it('when two workers start at once, then one works and the other finds it busy', async () => {
    const id = await newTask(50);
    const results = await Promise.all([runBackground(copy, deps(), id), runBackground(copy, deps(), id)]);
    expect(results.sort()).to.deep.equal(['busy', 'succeeded']);
    expect(await sink(id)).to.deep.equal({ n: 50, distinct: 50, max: 50 });
  });

  it('when a worker is taken over after its lease ended, then its next part is refused (fenced) and the successor continues from the checkpoint', async () => {
    const id = await newTask(60);
    let parts = 0;
    let successor: Promise<string> | undefined;
    const slow = deps({
      onPart: async () => {
        // After its 2nd part the first worker stalls past its lease; a second worker takes the row over.
        if (++parts !== 3) return;
        await q(`UPDATE ${TABLE} SET lease_until = now() - interval '1 ms' WHERE id = $1`, [id]);
        successor = runBackground(copy, deps(), id);
        await successor;
      },
    });
    expect(await runBackground(copy, slow, id)).to.equal('fenced');
    expect(await successor).to.equal('succeeded');
    expect(await sink(id)).to.deep.equal({ n: 60, distinct: 60, max: 60 });
  });

  it('when paced (busyPercent), then it pauses after each part but the last, each pause a share of the part and at most a quarter of the lease; at 100 it never pauses', async () => {
    const id = await newTask(45);
    const pauses: number[] = [];
    const paced = deps({
      busyPercent: 10,
      wait: async (ms) => void pauses.push(ms),
      // Each part takes 10 ms or more: at 10% that asks for nine times as long (45 ms leaves a timer
      // that fires a little early room), capped at a quarter of the 5000 ms lease.
      onPart: () => new Promise((resolve) => setTimeout(resolve, 10)),
    });
    expect(await runBackground(copy, paced, id)).to.equal('succeeded');
    expect(await sink(id)).to.deep.equal({ n: 45, distinct: 45, max: 45 });
    // Parts of 10: five, the fifth the last (nothing is left after it), so four pauses.
    expect(pauses).to.have.length(4);
    for (const ms of pauses) expect(ms).to.be.at.least(45).and.at.most(1250);
    const unpaced: number[] = [];
    const full = deps({ busyPercent: 100, wait: async (ms) => void unpaced.push(ms) });
    expect(await runBackground(copy, full, await newTask(45))).to.equal('succeeded');
    expect(unpaced).to.deep.equal([]);
  });

  it('when a part takes longer than the lease allows for a pause, then the pause is a quarter of the lease', async () => {
    const id = await newTask(20);
    const pauses: number[] = [];
    const slowParts = deps({
      leaseMs: 200,
      busyPercent: 1,
      wait: async (ms) => void pauses.push(ms),
      onPart: () => new Promise((resolve) => setTimeout(resolve, 5)),
    });
    expect(await runBackground(copy, slowParts, id)).to.equal('succeeded');
    expect(pauses).to.deep.equal([50]);
  });

  it('when it is stopped during a pause, then it gives the lease up before another part and the next worker finishes it', async () => {
    const id = await newTask(40);
    const stop = new AbortController();
    let parts = 0;
    const pausing = deps({
      busyPercent: 50,
      onPart: async () => void parts++,
      wait: async () => stop.abort(),
    });
    expect(await runBackground(copy, pausing, id, stop.signal)).to.equal('stopped');
    // One part written, then the pause that the stop ended: the second part was never read.
    expect(parts).to.equal(1);
    expect((await sink(id)).n).to.equal(10);
    // Given up at once: the next worker takes the row without waiting for the lease to run out.
    expect(await task(id)).to.deep.include({ status: 'PROCESSING' });
    expect(await runBackground(copy, deps(), id)).to.equal('succeeded');
    expect(await sink(id)).to.deep.equal({ n: 40, distinct: 40, max: 40 });
  });

  it('when its worker is stopped (aborted), then it gives the lease up at once and the next worker finishes it', async () => {
    const id = await newTask(40);
    const stop = new AbortController();
    let parts = 0;
    const stopping = deps({ onPart: async () => void (++parts === 2 && stop.abort()) });
    expect(await runBackground(copy, stopping, id, stop.signal)).to.equal('stopped');
    expect(await runBackground(copy, deps(), id)).to.equal('succeeded');
    expect(await sink(id)).to.deep.equal({ n: 40, distinct: 40, max: 40 });
  });
});
