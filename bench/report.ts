export interface Row {
  id: string;
  scenario: string;
  rps?: number;
  p50?: number;
  p99?: number;
  /** Non-201 answers and transport errors ("" = none). */
  nonFinal?: string;
  /** The measured value the target is about (a ratio, MB, ms...), already formatted. */
  value: string;
  target: string;
  /** undefined: reported, no target. */
  pass?: boolean;
}

const fmt = (v: number | undefined, digits = 0) =>
  v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits);

/** One plain-text table (also valid Markdown). */
export function renderTable(rows: Row[]): string {
  const header = ['Scenario', 'req/s', 'p50 ms', 'p99 ms', 'non-201', 'value', 'target', 'result'];
  const body = rows.map((r) => [
    r.scenario,
    fmt(r.rps),
    fmt(r.p50, 1),
    fmt(r.p99, 1),
    r.nonFinal === undefined ? '–' : r.nonFinal || '0',
    r.value,
    r.target,
    r.pass === undefined ? 'reported' : r.pass ? 'pass' : 'MISS',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (i >= 1 && i <= 3 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ')} |`;
  const sep = `|${widths.map((w, i) => (i >= 1 && i <= 3 ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
  return [line(header), sep, ...body.map(line)].join('\n');
}

export const ratio = (a: number, b: number) => (b > 0 ? a / b : Number.NaN);
/** Ratios with three decimals, so that a miss by a hair (0.597 against 0.60) reads as one. */
export const r2 = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : '–');

/** The median of `xs` (the mean of the middle two for an even count); undefined for none. */
export function median(xs: number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
