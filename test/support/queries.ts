import pg from 'pg';

type Query = (...args: unknown[]) => unknown;

/**
 * Every query text the in-process server sends while `fn` runs (the shared server shares this
 * process; every Sequelize and raw query is one call of `pg`'s `Client#query`: one round trip).
 */
export async function queriesDuring(fn: () => Promise<void>): Promise<string[]> {
  return (await callsDuring(fn)).map((c) => c.text);
}

/** One query call: its text (white space folded) and its bound values, if any. */
export interface QueryCall {
  text: string;
  values: unknown[] | undefined;
}

/** Every query call the in-process server makes while `fn` runs, with its bound values. */
export async function callsDuring(fn: () => Promise<void>): Promise<QueryCall[]> {
  const calls: QueryCall[] = [];
  const proto = pg.Client.prototype as unknown as { query: Query };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string; values?: unknown[] } | undefined;
    const text = typeof first === 'string' ? first : (first?.text ?? '');
    const values = Array.isArray(args[1])
      ? (args[1] as unknown[])
      : typeof first === 'object'
        ? first?.values
        : undefined;
    calls.push({ text: text.replace(/\s+/g, ' ').trim(), values });
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  // The shared server's purge job (every PURGE_INTERVAL_MS) may fire meanwhile, and its job runner
  // (pg-boss, its own schema `pgboss`) polls for jobs: neither is the request's.
  // The same for the webhook dispatcher's claims (every 250 ms) and attempts (events/webhook-worker.ts).
  return calls.filter(
    (c) =>
      !c.text.startsWith('SET LOCAL enable_seqscan') &&
      !/\bpgboss\./.test(c.text) &&
      !c.text.startsWith('/* webhook-worker */'),
  );
}

/** A block of new ids taken from a sequence (models/id-blocks.ts): one round trip per 64 creates. */
export const isIdBlock = (text: string) =>
  /^SELECT nextval\(\$1::regclass\)::text AS id FROM generate_series/.test(text);
