import type { AnyEffect, Downstream, EffectDeps, EffectRow } from './effect.js';
import { stepBoundary } from './effect.js';
import type { Lease } from './lease.js';
import type { Reply } from './outcome.js';

export type Settlement =
  /** Done (or refused) downstream, and finalised under our lease. */
  | { kind: 'final'; reply: Reply }
  /** The outcome is unknown for now; a retry or the recoverer resolves it later: a retry is useful
   * after `retryAfterMs` (the lease we keep, or at once when we gave it up). */
  | { kind: 'pending'; retryAfterMs: number }
  /** Certainly not done downstream (refused connection or a 5xx): a retry may perform again. */
  | { kind: 'not_done' }
  /** Someone took the attempt over while we worked: they own its outcome. */
  | { kind: 'fenced' };

/**
 * Tx 2 under our lease, between its step boundaries: the effect's fenced finalise. Fenced off:
 * someone took over after our lease ended; they own the outcome now and nothing was written.
 */
export async function finaliseEffect<Row extends EffectRow, R>(
  effect: AnyEffect,
  deps: EffectDeps,
  lease: Lease,
  row: Row,
  result: R,
): Promise<{ kind: 'final'; reply: Reply } | { kind: 'fenced' }> {
  await stepBoundary(effect, 'tx2.before');
  const reply: Reply | undefined = await effect.finalise(deps, lease, row, result);
  await stepBoundary(effect, 'tx2.after');
  return reply ? { kind: 'final', reply } : { kind: 'fenced' };
}

/** The downstream call between its step boundaries; it stops when our lease ends (a takeover may follow). */
async function performEffect<Row extends EffectRow, R>(
  effect: AnyEffect,
  deps: EffectDeps,
  lease: Lease,
  row: Row,
): Promise<Downstream<R>> {
  await stepBoundary(effect, 'perform.before');
  const signal = AbortSignal.timeout(Math.max(1, lease.until - Date.now()));
  const performed: Downstream<R> = await effect.perform(deps, row, signal);
  await stepBoundary(effect, 'perform.after');
  return performed;
}

/**
 * The downstream part of an effect under a lease. `first: 'query'` when continuing someone else's
 * attempt: a lease alone does not prove that their call failed, so the downstream is asked before
 * performing again (query first). `first: 'resume'` for a resumable resource (every earlier attempt
 * certainly did nothing): asked first too, and when the downstream cannot answer nothing has been
 * sent in this attempt either, so it stays not done (503 again, still resumable). Shared by requests,
 * the background recoverer and nothing else: reconcile only ever queries (settleByQuery).
 */
export async function settleEffect<Row extends EffectRow>(
  effect: AnyEffect,
  deps: EffectDeps,
  lease: Lease,
  row: Row,
  first: 'perform' | 'query' | 'resume',
): Promise<Settlement> {
  const settlement = await settle(effect, deps, lease, row, first);
  deps.onSettled?.(effect.name, settlement.kind);
  return settlement;
}

async function settle<Row extends EffectRow>(
  effect: AnyEffect,
  deps: EffectDeps,
  lease: Lease,
  row: Row,
  first: 'perform' | 'query' | 'resume',
): Promise<Settlement> {
  if (first !== 'perform') {
    const found = await effect.query(deps, row);
    if (found.kind === 'done') return finaliseEffect(effect, deps, lease, row, found.result);
    if (found.kind === 'unknown' && first === 'resume') return { kind: 'not_done' };
    if (found.kind === 'unknown') {
      // Cannot tell whether it was done: never perform blind. Free the lease for the next try.
      await deps.engine.leases.release(lease);
      return { kind: 'pending', retryAfterMs: 0 };
    }
  }
  const performed = await performEffect(effect, deps, lease, row);
  if (performed.kind === 'done') return finaliseEffect(effect, deps, lease, row, performed.result);
  if (performed.kind === 'not_done') return { kind: 'not_done' };
  // Sent, outcome unknown (time-out, reset): ask before anything else.
  const found = await effect.query(deps, row);
  if (found.kind === 'done') return finaliseEffect(effect, deps, lease, row, found.result);
  // Still unknown: keep the lease (the effect may yet land); a retry or the recoverer resolves it
  // later, once the lease has ended: what is left of it (the call and the query took part of it).
  return { kind: 'pending', retryAfterMs: Math.max(0, lease.until - Date.now()) };
}
