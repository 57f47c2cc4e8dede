import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { percentile } from './load.js';

export interface PgbenchResult {
  script: string;
  tps: number;
  /** Every transaction's latency (ms), ascending. */
  latencies: number[];
  p50: number;
  p99: number;
  latencyAvg: number;
  transactions: number;
  failed: number;
  durationSec: number;
}

export interface CapturedCall {
  text: string;
  values?: unknown[];
}

/** A value the captured request used that must vary per pgbench transaction. */
export interface Substitution {
  /** The exact value as the service sent it (quoted literal or bound parameter). */
  value: string;
  /** The pgbench SQL expression that replaces the quoted literal. */
  expression: string;
}

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'string') return quote(v);
  return quote(JSON.stringify(v));
}

/** Calls `f(index, char)` for every character outside single-quoted literals. */
function outsideQuotes(sql: string, f: (i: number) => void): void {
  let inQuote = false;
  for (let i = 0; i < sql.length; i++) {
    if (sql[i] === "'")
      inQuote = !inQuote; // '' inside a literal toggles twice: still inside
    else if (!inQuote) f(i);
  }
}

/** Bound parameters ($1, $2...) written into the text as literals (pgbench sends simple queries). */
function inline(text: string, values: unknown[] | undefined): string {
  if (!values || values.length === 0) return text;
  const cuts: Array<{ at: number; len: number; index: number }> = [];
  outsideQuotes(text, (i) => {
    if (text[i] !== '$' || !/[0-9]/.test(text[i + 1] ?? '')) return;
    const digits = /^[0-9]+/.exec(text.slice(i + 1))?.[0] ?? '';
    cuts.push({ at: i, len: digits.length + 1, index: Number(digits) - 1 });
  });
  let out = text;
  for (const c of cuts.reverse())
    out = out.slice(0, c.at) + literal(values[c.index]) + out.slice(c.at + c.len);
  return out;
}

/** One round trip = one pgbench command: inner statement separators become `\\;`. */
function oneCommand(sql: string): string {
  const body = sql.trim().replace(/;\s*$/, '');
  const semis: number[] = [];
  outsideQuotes(body, (i) => {
    if (body[i] === ';') semis.push(i);
  });
  let out = body;
  for (const i of semis.reverse()) out = `${out.slice(0, i)}\\;${out.slice(i + 1)}`;
  return `${out};`;
}

/**
 * A pgbench script that replays the round trips one captured request made, in order, with the
 * same texts and values, except the substituted ones (user, key), which vary per transaction.
 * So the database ceiling follows whatever the engine does now, not a hand copy of it.
 */
export function scriptFromCapture(calls: CapturedCall[], setup: string[], subs: Substitution[]): string {
  const lines = [...setup];
  for (const call of calls) {
    let sql = inline(call.text, call.values);
    for (const sub of subs) {
      // Inside another literal (a statement passed as a text value) the value stands between doubled
      // quotes: the expression is spliced in by concatenation.
      sql = sql.split(`''${sub.value.replace(/'/g, "''''")}''`).join(`''' || ${sub.expression} || '''`);
      sql = sql.split(quote(sub.value)).join(sub.expression);
    }
    lines.push(oneCommand(sql));
  }
  return `${lines.join('\n')}\n`;
}

/**
 * `pgbench -n -c <clients> -j 2 -T <secs> -f script` against the benchmark database, with the
 * per-transaction log (-l) for p50/p99. Simple protocol, one round trip per script line.
 */
export async function runPgbench(opts: {
  url: string;
  password?: string;
  script: string;
  name: string;
  clients: number;
  seconds: number;
}): Promise<PgbenchResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'idem-pgbench-'));
  try {
    const file = path.join(dir, `${opts.name}.sql`);
    await writeFile(file, opts.script);
    const args = [
      '-n',
      '-c',
      String(opts.clients),
      '-j',
      String(Math.min(2, opts.clients)),
      '-T',
      String(opts.seconds),
      '-f',
      file,
      '-l',
      '--log-prefix',
      path.join(dir, 'log'),
      opts.url,
    ];
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn('pgbench', args, {
        cwd: dir,
        env: { ...process.env, PGPASSWORD: opts.password ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let text = '';
      child.stdout.on('data', (d: Buffer) => {
        text += d.toString();
      });
      child.stderr.on('data', (d: Buffer) => {
        text += d.toString();
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), (opts.seconds + 60) * 1000);
      child.on('error', reject);
      child.on('exit', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve(text);
        else reject(new Error(`pgbench exited with ${code}:\n${text}`));
      });
    });
    const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? Number.NaN);
    const latencies: number[] = [];
    for (const f of await readdir(dir)) {
      if (!f.startsWith('log')) continue;
      for (const line of (await readFile(path.join(dir, f), 'utf8')).split('\n')) {
        const us = Number(line.split(' ')[2]);
        if (Number.isFinite(us)) latencies.push(us / 1000);
      }
    }
    latencies.sort((a, b) => a - b);
    return {
      script: opts.name,
      tps: num(/tps = ([\d.]+) \(without initial connection time\)/),
      latencyAvg: num(/latency average = ([\d.]+) ms/),
      transactions: num(/number of transactions actually processed: (\d+)/),
      failed: num(/number of failed transactions: (\d+)/) || 0,
      durationSec: opts.seconds,
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      latencies,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
