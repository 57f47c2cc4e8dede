/**
 * `npm run failover -- [--rounds N] [--load-seconds S] [--seed S] [--base P] [--etcd-members 1|3] [--back yes|no]`:
 * the failover test for longer: a cluster of its own (deploy/ha), N rounds of killing the leader
 * under load (with --back yes, the default, each round after the first fails over back to the
 * previous round's old leader), the summary printed. Exit 0: nothing lost, no invariant violated,
 * no error other than 503, 202 and the variants' 4xx; 1: otherwise; 2: usage or missing packages.
 */
import { z } from 'zod';
import { missingPrograms, startCluster } from '../../deploy/ha/cluster.js';
import { readCliArgs } from '../../server/cli-args.js';
import { LIMITS } from '../chaos/driver.js';
import { formatSummary, runFailover } from './failover.js';

const args = readCliArgs(
  {
    rounds: { type: 'string' },
    'load-seconds': { type: 'string' },
    seed: { type: 'string' },
    base: { type: 'string' },
    'etcd-members': { type: 'string' },
    back: { type: 'string' },
  },
  z.object({
    rounds: z.coerce.number().int().min(1).max(100).default(4),
    'load-seconds': z.coerce.number().min(1).max(600).default(10),
    seed: z.coerce.number().int().min(0).default(1),
    base: z.coerce.number().int().min(1024).max(60000).default(15440),
    'etcd-members': z.enum(['1', '3']).default('3'),
    back: z.enum(['yes', 'no']).default('yes'),
  }),
);
if (!args.ok) {
  console.error(
    `${args.problem}\nusage: npm run failover -- [--rounds N] [--load-seconds S] [--seed S] [--base P] [--etcd-members 1|3] [--back yes|no]`,
  );
  process.exit(2);
}
const missing = missingPrograms();
if (missing.length > 0) {
  console.error(
    `missing: ${missing.join(', ')} (apt-get install patroni etcd-server haproxy pgbouncer postgresql-15)`,
  );
  process.exit(2);
}
const v = args.values;
const log = (line: string) => console.log(line);
const started = Date.now();
const cluster = await startCluster({
  base: v.base,
  etcdMembers: Number(v['etcd-members']),
  bounds: { waitMs: LIMITS.waitMs, leaseMs: LIMITS.leaseMs },
  log,
});
let code = 1;
try {
  const { summary } = await runFailover({
    cluster,
    rounds: v.rounds,
    loadMs: v['load-seconds'] * 1000,
    seed: v.seed,
    back: v.back === 'yes',
    log,
  });
  console.log(`\n${formatSummary(summary)}`);
  console.log(`run took ${((Date.now() - started) / 1000).toFixed(0)} s`);
  for (const message of summary.violations.slice(0, 10)) console.log(`VIOLATION ${message}`);
  code =
    summary.violations.length === 0 &&
    summary.lost === 0 &&
    summary.other5xx === 0 &&
    summary.unexpected === 0
      ? 0
      : 1;
} finally {
  await cluster.down();
}
process.exit(code);
