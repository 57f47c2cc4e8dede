import { QueryTypes, type Sequelize } from 'sequelize';
import { failpoint } from '../core/failpoints.js';

/**
 * Deletes expired, finished records in small batches (short transactions, no long locks), skipping
 * rows another instance is purging. PROCESSING records are never touched: a live lease is work in
 * progress. Business unique constraints live on the business tables and stay in force.
 */
export async function purgeExpired(sequelize: Sequelize, batchSize = 500, maxBatches = 100): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    await failpoint('purge.batch');
    const rows = await sequelize.query<{ n: string }>(
      `WITH doomed AS (
         SELECT scope_key FROM idempotency_records
         WHERE expires_at < now() AND status <> 'PROCESSING'
         ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
       , gone AS (DELETE FROM idempotency_records r USING doomed d WHERE r.scope_key = d.scope_key RETURNING 1)
       SELECT count(*) AS n FROM gone`,
      { bind: [batchSize], type: QueryTypes.SELECT },
    );
    const n = Number(rows[0]?.n ?? 0);
    total += n;
    if (n < batchSize) break;
  }
  return total;
}
