// The paced batch loop shared by the records' and the events' purges (core/pacing.ts).
import { expect } from 'chai';
import { pacedBatches } from '../../core/pacing.js';

/** A batch function over `total` items, `size` a batch, each batch taking at least `ms`. */
function batches(total: number, size: number, ms = 0) {
  let left = total;
  return async () => {
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    const n = Math.min(size, left);
    left -= n;
    return n;
  };
}

describe('pacing: batches paced by a share of wall time', () => {
  it('when paced, then it pauses after each full batch (never after the last, short one), each pause a share of its batch, and tells every batch', async () => {
    const pauses: number[] = [];
    const told: number[] = [];
    const total = await pacedBatches(
      {
        batchSize: 4,
        maxBatches: 100,
        busyPercent: 25,
        wait: async (ms) => void pauses.push(ms),
        onBatch: (n) => told.push(n),
      },
      batches(10, 4, 10),
    );
    expect(total).to.equal(10);
    expect(told).to.deep.equal([4, 4, 2]);
    // Two full batches, each of 10 ms or more: at 25%, three times as long (25 ms leaves room for a
    // timer that fires a little early).
    expect(pauses).to.have.length(2);
    for (const ms of pauses) expect(ms).to.be.at.least(25);
  });

  it('when a run ends on a full batch, then the empty batch after it ends the run without a pause', async () => {
    const pauses: number[] = [];
    const told: number[] = [];
    const total = await pacedBatches(
      {
        batchSize: 5,
        busyPercent: 50,
        wait: async (ms) => void pauses.push(ms),
        onBatch: (n) => told.push(n),
      },
      batches(10, 5),
    );
    expect(total).to.equal(10);
    expect(told).to.deep.equal([5, 5]);
    expect(pauses).to.have.length(2);
  });

  it('when busyPercent is 100 (or absent), then the batches run back to back', async () => {
    const pauses: number[] = [];
    const wait = async (ms: number) => void pauses.push(ms);
    expect(await pacedBatches({ batchSize: 2, busyPercent: 100, wait }, batches(7, 2))).to.equal(7);
    expect(await pacedBatches({ batchSize: 2, wait }, batches(7, 2))).to.equal(7);
    expect(pauses).to.deep.equal([]);
  });

  it('when the signal aborts during a pause, then no further batch runs; maxBatches bounds a run', async () => {
    const stop = new AbortController();
    const total = await pacedBatches(
      { batchSize: 2, busyPercent: 25, signal: stop.signal, wait: async () => stop.abort() },
      batches(10, 2),
    );
    expect(total).to.equal(2);
    expect(await pacedBatches({ batchSize: 2, maxBatches: 3 }, batches(10, 2))).to.equal(6);
  });

  it('when busyPercent is outside (0, 100], then the run is refused after its first batch, before any pause', async () => {
    let error: unknown;
    await pacedBatches({ batchSize: 1, busyPercent: 0 }, batches(3, 1)).catch((err) => {
      error = err;
    });
    expect(error).to.be.instanceOf(RangeError);
  });
});
