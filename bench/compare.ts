/**
 * A/B of two commits from their `npm run bench` result files: each row's req/s and its ratio within
 * its own run (the `value` column: what a row's target is about, and what survives a machine whose
 * speed drifts between runs), and CPU per answer of the service and PostgreSQL, as the median over
 * the runs of each side, with B ÷ A. Run the two sides alternately (A, B, A, B) so drift spreads
 * over both.
 *
 *   node --import tsx bench/compare.ts --a=<file,...> --b=<file,...>
 *
 * (The service is one process per run: two commits cannot share one run, so the A/B is of runs.)
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { median } from './report.js';

interface Row {
  id: string;
  scenario: string;
  rps?: number;
  value: string;
}
interface Cpu {
  name: string;
  service: number;
  postgres: number;
}
interface Result {
  meta: { git?: { commit?: string }; loadAverage?: { start?: number[] } };
  rows: Row[];
  cpuMsPerRequest?: Cpu[];
}

const fmt = (v: number | undefined, digits: number) => (v === undefined ? '–' : v.toFixed(digits));
const change = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || a === 0 ? '–' : (b / a).toFixed(3);

async function load(list: string): Promise<Result[]> {
  return Promise.all(list.split(',').map(async (f) => JSON.parse(await readFile(f, 'utf8')) as Result));
}

const { values } = parseArgs({ options: { a: { type: 'string' }, b: { type: 'string' } } });
if (!values.a || !values.b) {
  console.error('usage: node --import tsx bench/compare.ts --a=<file,...> --b=<file,...>');
  process.exit(2);
}
const [a, b] = await Promise.all([load(values.a), load(values.b)]);
const commits = (rs: Result[]) => [...new Set(rs.map((r) => r.meta.git?.commit ?? '?'))].join(',');
console.log(`A: ${commits(a)} (${a.length} runs); B: ${commits(b)} (${b.length} runs); medians\n`);

const numeric = (v: string) => {
  const n = Number.parseFloat(v);
  return Number.isFinite(n) ? n : undefined;
};
const pick = (rs: Result[], id: string, f: (r: Row) => number | undefined) =>
  median(rs.flatMap((r) => r.rows.filter((row) => row.id === id).map(f)).filter((x) => x !== undefined));
const ids = [...new Set([...a, ...b].flatMap((r) => r.rows.map((row) => row.id)))];
console.log('| Row | req/s A | req/s B | B÷A | value A | value B | B÷A |');
console.log('|---|---:|---:|---:|---:|---:|---:|');
for (const id of ids) {
  const [ra, rb] = [pick(a, id, (r) => r.rps), pick(b, id, (r) => r.rps)];
  const [va, vb] = [pick(a, id, (r) => numeric(r.value)), pick(b, id, (r) => numeric(r.value))];
  console.log(
    `| ${id} | ${fmt(ra, 0)} | ${fmt(rb, 0)} | ${change(ra, rb)} | ${fmt(va, 3)} | ${fmt(vb, 3)} | ${change(va, vb)} |`,
  );
}

const cpu = (rs: Result[], name: string, k: 'service' | 'postgres') =>
  median(rs.flatMap((r) => (r.cpuMsPerRequest ?? []).filter((c) => c.name === name).map((c) => c[k])));
const names = [...new Set([...a, ...b].flatMap((r) => (r.cpuMsPerRequest ?? []).map((c) => c.name)))];
console.log('\nCPU per answer, ms (service / PostgreSQL)\n');
console.log('| Scenario | A | B | service B÷A | PostgreSQL B÷A |');
console.log('|---|---:|---:|---:|---:|');
for (const n of names) {
  const [sa, sb, pa, pb] = [
    cpu(a, n, 'service'),
    cpu(b, n, 'service'),
    cpu(a, n, 'postgres'),
    cpu(b, n, 'postgres'),
  ];
  console.log(
    `| ${n} | ${fmt(sa, 3)} / ${fmt(pa, 3)} | ${fmt(sb, 3)} / ${fmt(pb, 3)} | ${change(sa, sb)} | ${change(pa, pb)} |`,
  );
}
