import type { Sequelize } from 'sequelize';
import { failpoint } from '../core/failpoints.js';
import { deleteRecords } from './caps.js';

/**
 * Deletes expired, finished records in small batches (short transactions, no long locks), skipping
 * rows another instance is purging. PROCESSING records are never touched: a live lease is work in
 * progress. Business unique constraints live on the business tables and stay in force.
 */
export async function purgeExpired(sequelize: Sequelize, batchSize = 500, maxBatches = 100): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    await failpoint('purge.batch');
    // Records whose slot row a running claim holds are skipped and picked up by a later batch.
    const n = await deleteRecords(
      sequelize,
      `r.expires_at < now() AND r.status <> 'PROCESSING'`,
      [],
      batchSize,
    );
    total += n;
    if (n < batchSize) break;
  }
  return total;
}
