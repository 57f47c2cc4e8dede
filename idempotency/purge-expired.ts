import type { Sequelize } from 'sequelize';
import { failpoint } from '../core/failpoints.js';
import { pacedBatches, type Wait } from '../core/pacing.js';
import { deleteRecords } from './caps.js';
import { deleteExpiredTombstones } from './tombstones.js';

export interface PurgeOptions {
  /** How long a purged record's tombstone refuses its key (IDEMPOTENCY_TOMBSTONE_DAYS). */
  tombstoneDays?: number;
  /** Records (and expired tombstones) deleted per batch (one short transaction each). */
  batchSize?: number;
  /** Batches per call at most; the call also ends at the first batch that is not full. */
  maxBatches?: number;
  /**
   * The share of wall time, in percent, the purge may spend deleting: after a batch that took
   * `t` ms it pauses `t × (100 − busyPercent) / busyPercent` ms. 100 runs batches back to back.
   */
  busyPercent?: number;
  /** Ends the purge between batches (and cuts a pause short): shutdown. */
  signal?: AbortSignal;
  /** Told each batch's count as it commits (a paced run over a backlog lasts minutes: metrics move as it goes). */
  onBatch?: (deleted: number) => void;
  /** How a pause is waited (a timer; tests pass their own). Resolves early when `signal` aborts. */
  wait?: Wait;
}

/**
 * Deletes expired, finished records in small batches (short transactions, no long locks), skipping
 * rows another instance is purging, each leaving its tombstone (caps.ts deleteRecordsStatement);
 * then the expired tombstones, in batches paced alike. PROCESSING records are never touched: a live
 * lease is work in progress. Business unique constraints live on the business tables and stay in force.
 *
 * Paced by time (`busyPercent`): a backlog is worked off at a fraction of full speed, so that on a
 * small machine the purging backend does not take a whole core from the requests.
 */
export async function purgeExpired(sequelize: Sequelize, options: PurgeOptions = {}): Promise<number> {
  const { batchSize = 500, tombstoneDays = 30 } = options;
  const where = `r.expires_at < now() AND r.status <> 'PROCESSING'`;
  // Records whose slot row or key lock a running claim holds are skipped and picked up by a later batch.
  const total = await paced(options, () => deleteRecords(sequelize, where, [], batchSize, tombstoneDays));
  await paced({ ...options, onBatch: undefined }, () => deleteExpiredTombstones(sequelize, batchSize));
  return total;
}

/** The purge's batches, paced (core/pacing.ts), each after its failpoint. */
const paced = (options: PurgeOptions, batch: () => Promise<number>) =>
  pacedBatches({ ...options, batchSize: options.batchSize ?? 500 }, async () => {
    await failpoint('purge.batch');
    return batch();
  });
