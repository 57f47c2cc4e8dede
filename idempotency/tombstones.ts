import type { Sequelize } from 'sequelize';
import { QueryTypes } from 'sequelize';
import { KeyExpired } from '../core/errors.js';

/**
 * Tombstones (migration 20261126000040): a purged key's scope and request digests, kept
 * IDEMPOTENCY_TOMBSTONE_DAYS, so that the key is refused (40905) instead of executed again.
 */

/** The HINT idem_claim raises a tombstoned key with (migration 20261126000040). */
export const KEY_EXPIRED_HINT = 'idem_claim: key expired';

/** The claim refused a tombstoned key (the error as pg or Sequelize hands it up). */
export function isKeyExpiredError(err: unknown): boolean {
  const e = err as { hint?: unknown; original?: { hint?: unknown } } | null;
  return e?.hint === KEY_EXPIRED_HINT || e?.original?.hint === KEY_EXPIRED_HINT;
}

/** Calls `run`, answering the claim's refusal of a tombstoned key as KeyExpired (409 40905). */
export async function refusingExpired<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (isKeyExpiredError(err)) throw new KeyExpired();
    throw err;
  }
}

/**
 * The tombstones of the records a statement deleted (`gone`, with scope_key and request_hash), as a
 * CTE step. A tombstone left over from an earlier purge of the same key (expired, not yet purged
 * itself, so the key was claimed again) is renewed rather than kept stale.
 */
export function buryStatement(gone: string, tombstoneDays: number): string {
  return `INSERT INTO idempotency_tombstones (scope_digest, request_digest, expires_at)
       SELECT sha256(convert_to(g.scope_key, 'UTF8')), sha256(convert_to(g.request_hash, 'UTF8')),
              now() + make_interval(days => ${Math.floor(tombstoneDays)})
       FROM ${gone} g
       ON CONFLICT (scope_digest) DO UPDATE
         SET request_digest = EXCLUDED.request_digest, expires_at = EXCLUDED.expires_at`;
}

/** Deletes up to `limit` expired tombstones (one short statement; rows another purge holds are skipped). */
export async function deleteExpiredTombstones(sequelize: Sequelize, limit: number): Promise<number> {
  const rows = await sequelize.query<{ n: string }>(
    `WITH gone AS (
       DELETE FROM idempotency_tombstones t WHERE t.scope_digest IN (
         SELECT x.scope_digest FROM idempotency_tombstones x WHERE x.expires_at < now()
         ORDER BY x.expires_at LIMIT ${Math.floor(limit)} FOR UPDATE SKIP LOCKED)
       RETURNING 1)
     SELECT count(*) AS n FROM gone`,
    { type: QueryTypes.SELECT },
  );
  return Number(rows[0]?.n ?? 0);
}
