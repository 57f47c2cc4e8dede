import { QueryTypes, type Sequelize } from 'sequelize';

export interface ResumableReading {
  /** Payments whose last attempt certainly charged nothing, waiting for their client. */
  count: number;
  /** Seconds since the oldest of them became resumable (0 when none). */
  oldestAgeSeconds: number;
}

/** The resumable payments (CONTRACT section 3), from their partial index. */
export async function resumablePayments(sequelize: Sequelize): Promise<ResumableReading> {
  const [row] = await sequelize.query<{ count: string; age: number | null }>(
    `SELECT count(*) AS count, EXTRACT(EPOCH FROM now() - min(resumable_since))::float8 AS age
     FROM payments WHERE resumable_since IS NOT NULL AND status = 'PROCESSING'`,
    { type: QueryTypes.SELECT },
  );
  return { count: Number(row?.count ?? 0), oldestAgeSeconds: Math.max(0, row?.age ?? 0) };
}
