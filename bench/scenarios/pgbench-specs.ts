import type { BenchRun } from '../bench-run.js';
import { type LoadResult, percentile } from '../load.js';
import type { Spec } from '../measure.js';
import { type PgbenchResult, runPgbench, type Substitution, scriptFromCapture } from '../pgbench.js';
import { ADMIN_BASE, ADMINS, TENANT } from '../settings.js';
import type { Captures } from './round-trips.js';

export async function pgbenchSpecs(ctx: BenchRun, captures: Captures): Promise<Spec[]> {
  const { CONNECTIONS, results, plainUser } = ctx;
  const setup = [
    `\\set pgb_uid random(${ADMIN_BASE + 1}, ${ADMIN_BASE + ADMINS})`,
    '\\set pgb_key random(1, 9000000000000000000)',
  ];
  const { idempotentCreate: idem, plainCreate: plain } = captures;
  const uidSubs = (uid: number): Substitution[] => [{ value: String(uid), expression: "':pgb_uid'" }];
  // A block of ids taken from the sequence (models/id-blocks.ts) is one round trip per 64 creates,
  // not part of one create; the new user's id (the call's resource id, and in its INSERT) is then one
  // that no other transaction uses: a random one far above the sequence's values.
  const calls = idem.calls.filter((c) => !/^SELECT nextval\(\$1::regclass\)/.test(c.text));
  const executed = calls.find((c) => /idem_execute\(/.test(c.text));
  const allocated = executed?.values?.[16];
  const idSubs: Substitution[] =
    typeof allocated === 'string' ? [{ value: allocated, expression: '(:pgb_id)::text' }] : [];
  const scripts = {
    idempotent: scriptFromCapture(
      calls,
      [...setup, ...(idSubs.length ? ['\\set pgb_id random(1000000000000000000, 9000000000000000000)'] : [])],
      [
        {
          value: `${TENANT}:${idem.uid}:users.create:${idem.key}`,
          expression: `('${TENANT}:' || :pgb_uid || ':users.create:pgb-' || :pgb_key)`,
        },
        { value: `${TENANT}:${idem.uid}`, expression: `('${TENANT}:' || :pgb_uid)` },
        ...uidSubs(idem.uid),
        ...idSubs,
      ],
    ),
    plain: scriptFromCapture(plain.calls, setup.slice(0, 1), uidSubs(plain.uid)),
  };
  results.pgbench = {
    command: `pgbench -n -c ${CONNECTIONS} -j 2 -T <segment> -f <script> -l`,
    scripts,
  };
  const spec = (name: string, script: string): Spec => ({
    name,
    url: ctx.db.url,
    next: plainUser,
    run: async (seconds) => {
      const r: PgbenchResult = await runPgbench({
        url: ctx.db.url,
        password: ctx.db.password,
        script,
        name,
        clients: CONNECTIONS,
        seconds: Math.max(1, Math.round(seconds)),
      });
      const samples = Float64Array.from(r.latencies);
      const out: Omit<LoadResult, 'samples'> = {
        durationSec: r.durationSec,
        responses: r.transactions,
        created: r.transactions,
        rps: r.tps,
        p50: r.p50,
        p90: percentile(samples, 0.9),
        p99: r.p99,
        max: samples.length ? samples[samples.length - 1] : Number.NaN,
        statuses: {},
        errors: r.failed,
      };
      return Object.defineProperty(out, 'samples', { value: samples, enumerable: false }) as LoadResult;
    },
  });
  return [spec('pgbench-idempotent', scripts.idempotent), spec('pgbench-plain', scripts.plain)];
}
