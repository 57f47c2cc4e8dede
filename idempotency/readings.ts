import { QueryTypes, type Sequelize } from 'sequelize';

/**
 * Age in seconds of the oldest committed PROCESSING record (0 when none): a record older than the
 * lease plus the recoverer's interval means something is stuck. Reads the PROCESSING rows only
 * (a partial index), which the in-flight caps keep few.
 */
export async function oldestProcessingAgeSeconds(sequelize: Sequelize): Promise<number> {
  const [row] = await sequelize.query<{ age: number | null }>(
    `SELECT EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS age FROM idempotency_records
     WHERE status = 'PROCESSING' AND lease_until IS NOT NULL`,
    { type: QueryTypes.SELECT },
  );
  return Math.max(0, row?.age ?? 0);
}
