import { QueryTypes, type Sequelize } from 'sequelize';
import type { AnyEffect, EffectDeps, EffectRow } from './effect.js';
import { registeredEffects, stepBoundary } from './effect.js';
import { rowOfRecord } from './effect-run.js';
import { finaliseEffect, settleEffect } from './effect-settle.js';

/**
 * Finishes an effect's attempts whose executor died or gave up (PROCESSING past its lease), so a
 * resource becomes final even when its client never retries. Runs in every instance at once: the
 * takeover is a conditional update with one winner, and the winner asks the downstream before
 * performing. Returns how many records it took over; `onTakenOver` is called at each takeover, before
 * its resource can become final (a metric counted then is never behind what a reader of the
 * resource sees).
 */
export async function sweepExpired(
  effect: AnyEffect,
  deps: EffectDeps,
  batch = 20,
  onError: (scopeKey: string, err: unknown) => void = () => {},
  onTakenOver: () => void = () => {},
): Promise<number> {
  const expired = await deps.engine.leases.findExpired(effect.name, batch);
  let taken = 0;
  for (const record of expired) {
    const { resourceId } = record;
    if (!resourceId) continue;
    // One resource that fails (its row gone, the database busy) must not stop the others: its lease
    // ends by itself and the next round tries it again.
    try {
      const lease = await deps.engine.leases.takeOver(record.scopeKey, record.ownerToken);
      if (!lease) continue;
      taken += 1;
      onTakenOver();
      await stepBoundary(effect, 'recoverer.takeover');
      const row = await rowOfRecord(effect, resourceId);
      const settlement = await settleEffect(effect, deps, lease, row, 'query');
      // Downstream unavailable right now: end our lease so the next round (here or elsewhere) tries
      // again. Not made resumable: its client was answered 202 (or nothing), not "not done".
      if (settlement.kind === 'not_done') await deps.engine.leases.release(lease);
    } catch (err) {
      onError(record.scopeKey, err);
    }
  }
  return taken;
}

interface OpenRecord {
  scopeKey: string;
  ownerToken: string | null;
  status: 'PROCESSING' | 'FAILED_RETRYABLE';
  live: boolean;
}

/** Records that may still finish this resource (any operation: resource ids are unique). */
export function openRecords(deps: Pick<EffectDeps, 'sequelize'>, id: string): Promise<OpenRecord[]> {
  return deps.sequelize.query<OpenRecord>(
    `SELECT scope_key AS "scopeKey", owner_token AS "ownerToken", status,
            (status = 'PROCESSING' AND lease_until >= now()) AS live
     FROM idempotency_records WHERE resource_id = $1 AND status IN ('PROCESSING', 'FAILED_RETRYABLE')`,
    { bind: [id], type: QueryTypes.SELECT },
  );
}

export type ByQuery = 'finalised' | 'taken' | 'fenced' | 'unknown' | 'not_done';

/**
 * Reconcile's repair: finishes the resource through its open records with the service's own steps
 * (take over: one winner; query; finalise under the lease). It never performs: a query that settles
 * nothing gives the record back in the state it had, for the service to finish. `taken`: someone
 * else holds it; `fenced`: taken over while we finalised.
 */
export async function settleByQuery<Row extends EffectRow>(
  effect: AnyEffect,
  deps: EffectDeps,
  row: Row,
  records: OpenRecord[],
): Promise<ByQuery> {
  let result: ByQuery = 'taken';
  for (const record of records) {
    const lease = await deps.engine.leases.takeOver(record.scopeKey, record.ownerToken);
    if (!lease) return 'taken';
    const found = await effect.query(deps, row);
    if (found.kind === 'done') {
      const finalised = await finaliseEffect(effect, deps, lease, row, found.result);
      if (finalised.kind === 'fenced') return 'fenced';
      result = 'finalised';
      continue;
    }
    if (record.status === 'FAILED_RETRYABLE') await deps.engine.leases.markRetryable(lease);
    else await deps.engine.leases.release(lease);
    return found.kind;
  }
  return result;
}

export interface ResumableReading {
  /** Resources whose last attempt certainly did nothing downstream, waiting for their client. */
  count: number;
  /** Seconds since the oldest of them became resumable (0 when none). */
  oldestAgeSeconds: number;
}

/** The effect's resumable resources (CONTRACT section 3), from their partial index. */
export async function resumableReading(
  deps: Pick<EffectDeps, 'sequelize'>,
  effect: AnyEffect,
): Promise<ResumableReading> {
  const [row] = await deps.sequelize.query<{ count: string; age: number | null }>(
    `SELECT count(*) AS count, EXTRACT(EPOCH FROM now() - min(resumable_since))::float8 AS age
     FROM ${effect.table} WHERE resumable_since IS NOT NULL AND status = 'PROCESSING'`,
    { type: QueryTypes.SELECT },
  );
  return { count: Number(row?.count ?? 0), oldestAgeSeconds: Math.max(0, row?.age ?? 0) };
}

/** Every registered effect's resumable reading, by its operation name (the metrics' gauges). */
export async function resumableByEffect(sequelize: Sequelize): Promise<Map<string, ResumableReading>> {
  const readings = new Map<string, ResumableReading>();
  for (const effect of registeredEffects())
    readings.set(effect.name, await resumableReading({ sequelize }, effect));
  return readings;
}
