/**
 * Preloaded into the benchmarked service process only (`node --import tsx --import ./bench/probe.ts
 * server/main.ts`); no service file is changed. Idle unless the benchmark asks over the IPC channel:
 * - query counting: wraps `pg.Client.prototype.query`, the one call every Sequelize query and every
 *   raw engine query goes through, so one call = one database round trip (a multi-statement string
 *   such as the Mode A claim is one call). When counting is off the wrapper is one branch.
 * - CPU profiling of one scenario (V8 inspector, the same data as `node --cpu-prof`).
 */
import { writeFileSync } from 'node:fs';
import inspector from 'node:inspector';
import v8 from 'node:v8';
import vm from 'node:vm';
import pg from 'pg';

type Message =
  | { type: 'count-start'; capture?: boolean }
  | { type: 'count-stop' }
  | { type: 'profile-start' }
  | { type: 'profile-stop'; file: string }
  | { type: 'memory'; gc?: boolean };

let counting = false;
let calls = 0;
const texts = new Map<string, number>();
/** With `capture`, every call's exact text and parameter values, in order (one request's worth). */
let captured: Array<{ text: string; values?: unknown[] }> | undefined;

function normalise(sql: string): string {
  return sql
    .replace(/\s+/g, ' ')
    .replace(/'(?:[^']|'')*'/g, "'?'")
    .replace(/\b\d+(\.\d+)?\b/g, '?')
    .trim()
    .slice(0, 160);
}

const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
// Replaced as a property (the probe counts every call of every client in this process), so that
// its typed overloads need no cast to take a function of any arguments.
Object.defineProperty(pg.Client.prototype, 'query', {
  configurable: true,
  writable: true,
  value: countingQuery,
});

function countingQuery(this: unknown, ...args: unknown[]) {
  const first = args[0] as string | { text?: string } | undefined;
  const text = typeof first === 'string' ? first : (first?.text ?? '?');
  // The webhook dispatcher's claims (every 250 ms, events/webhook-worker.ts) are no request's.
  if (counting && !text.startsWith('/* webhook-worker */')) {
    calls += 1;
    const key = normalise(text);
    texts.set(key, (texts.get(key) ?? 0) + 1);
    if (captured) {
      const second = args[1];
      const values =
        first && typeof first === 'object' && 'values' in first
          ? (first as { values?: unknown[] }).values
          : Array.isArray(second)
            ? (second as unknown[])
            : undefined;
      captured.push({
        text,
        values: values?.map((v) =>
          v instanceof Date ? v.toISOString() : Buffer.isBuffer(v) ? v.toString() : v,
        ),
      });
    }
  }
  return original.apply(this, args);
}

let session: inspector.Session | undefined;
const post = (method: string, params: object = {}) =>
  new Promise<unknown>((resolve, reject) =>
    session?.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
  );

async function handle(m: Message): Promise<void> {
  switch (m?.type) {
    case 'count-start':
      calls = 0;
      texts.clear();
      captured = m.capture ? [] : undefined;
      counting = true;
      process.send?.({ type: 'count-started' });
      return;
    case 'count-stop':
      counting = false;
      process.send?.({ type: 'counts', calls, texts: [...texts.entries()], captured });
      captured = undefined;
      return;
    case 'memory': {
      const mb = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
      if (m.gc) {
        // A full GC first, so that heapUsed is what is retained, not garbage V8 has not collected yet.
        v8.setFlagsFromString('--expose-gc');
        (vm.runInNewContext('gc') as () => void)();
      }
      const mem = process.memoryUsage();
      process.send?.({
        type: 'memory-usage',
        gc: m.gc === true,
        rssMb: mb(mem.rss),
        heapTotalMb: mb(mem.heapTotal),
        heapUsedMb: mb(mem.heapUsed),
        externalMb: mb(mem.external),
        arrayBuffersMb: mb(mem.arrayBuffers),
      });
      return;
    }
    case 'profile-start':
      session = new inspector.Session();
      session.connect();
      await post('Profiler.enable');
      await post('Profiler.setSamplingInterval', { interval: 500 });
      await post('Profiler.start');
      process.send?.({ type: 'profile-started' });
      return;
    case 'profile-stop': {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown };
      writeFileSync(m.file, JSON.stringify(profile));
      session?.disconnect();
      session = undefined;
      process.send?.({ type: 'profile-stopped' });
      return;
    }
  }
}

if (process.send) {
  process.on('message', (m: Message) => {
    handle(m).catch((err: unknown) => process.send?.({ type: 'probe-error', message: String(err) }));
  });
  // The IPC channel must not keep the service alive on shutdown.
  process.channel?.unref();
}
