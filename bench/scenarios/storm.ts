import { randomUUID } from 'node:crypto';
import type { BenchRun } from '../bench-run.js';
import { type LoadRequest, load, nonFinal } from '../load.js';
import { STORM_BASE, STORM_SIZE, TENANT, WAIT_MS } from '../settings.js';

/**
 * The duplicate storm; with `slowWriteMs`, every business write is held that long inside its
 * transaction (the service's `local.after-write=stall(ms)` failpoint, set for this scenario only
 * over PUT /__failpoints), so that the duplicates wait on a slow first request.
 */
export async function stormScenario(ctx: BenchRun, slowWriteMs = 0): Promise<void> {
  const { P, log } = ctx;
  const label = slowWriteMs > 0 ? `storm-slow-write` : 'storm';
  log(
    `${label}: ${P.stormRounds} rounds of ${STORM_SIZE} concurrent requests with one key each${slowWriteMs ? `, business write held ${slowWriteMs} ms` : ''}`,
  );
  const setFailpoints = async (spec: string) => {
    const res = await fetch(`${ctx.server.url}/__failpoints`, { method: 'PUT', body: spec });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`PUT /__failpoints ${spec}: ${res.status}`);
  };
  if (slowWriteMs > 0) await setFailpoints(`local.after-write=stall(${slowWriteMs})`);
  try {
    await stormRounds(ctx, label, slowWriteMs);
  } finally {
    if (slowWriteMs > 0) await setFailpoints('');
  }
}

async function stormRounds(ctx: BenchRun, label: string, slowWriteMs: number): Promise<void> {
  const { P, log, results, rows, runId, token } = ctx;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let durationSec = 0;
  const names: string[] = [];
  for (let round = 0; round < P.stormRounds; round++) {
    const name = `${label}-${runId}-${round}`;
    names.push(name);
    const request: LoadRequest = {
      method: 'POST',
      path: '/api/v1/users',
      headers: {
        authorization: token(STORM_BASE + (slowWriteMs > 0 ? 1000 : 0) + 1 + round, 'admin'),
        // At most 64 characters (the key's limit): no label in it.
        'idempotency-key': `${runId}-${round}-${slowWriteMs}-${randomUUID()}`,
      },
      body: JSON.stringify({ name, age: 30 }),
    };
    const r = await load({
      url: ctx.server.url,
      connections: STORM_SIZE,
      amount: STORM_SIZE,
      next: () => request,
    });
    durationSec += r.durationSec;
    // Percentiles over all rounds, not per round: keep every latency.
    latencies.push(...r.samples);
    for (const [s, c] of Object.entries(r.statuses)) statuses[s] = (statuses[s] ?? 0) + c;
    errors += r.errors;
  }
  const effects = await ctx.sql.query<{ name: string; n: string }>(
    'SELECT name, count(*) AS n FROM users WHERE tenant_id = $1 AND name = ANY($2) GROUP BY name',
    [TENANT, names],
  );
  const perKey = new Map(effects.rows.map((e) => [e.name, Number(e.n)]));
  const exactlyOnce = names.filter((n) => perKey.get(n) === 1).length;
  latencies.sort((a, b) => a - b);
  const pick = (q: number) => latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)];
  const p99 = pick(0.99);
  const fiveXx = Object.entries(statuses)
    .filter(([s]) => Number(s) >= 500)
    .reduce((a, [, c]) => a + c, 0);
  const bound = WAIT_MS + 100;
  results[label] = {
    rounds: P.stormRounds,
    size: STORM_SIZE,
    statuses,
    errors,
    p50: pick(0.5),
    p99,
    max: latencies[latencies.length - 1],
    keysWithExactlyOneEffect: exactlyOnce,
    effectsPerKey: Object.fromEntries(perKey),
  };
  log(
    `${label}: p99 ${p99.toFixed(1)} ms, statuses ${JSON.stringify(statuses)}, ${exactlyOnce}/${names.length} keys with one effect`,
  );
  const created = statuses['201'] ?? 0;
  rows.push({
    id: label,
    scenario: `Duplicate storm (${STORM_SIZE} × 1 key, ${P.stormRounds} keys)${slowWriteMs ? `, business write ${slowWriteMs} ms` : ''}`,
    rps: durationSec > 0 ? created / durationSec : Number.NaN,
    p50: pick(0.5),
    p99,
    nonFinal: nonFinal({ statuses, errors }),
    value: `p99 ${p99.toFixed(0)} ms; 5xx ${fiveXx}; ${exactlyOnce}/${names.length} keys 1 effect`,
    target: `p99 ≤ ${bound} ms, 0 5xx, 1 effect/key`,
    pass: p99 <= bound && fiveXx === 0 && errors === 0 && exactlyOnce === names.length,
  });
}

/** Orders `<prefix>-1..n`, order g owned by users[g % USERS], amount 10.50 USD. */
