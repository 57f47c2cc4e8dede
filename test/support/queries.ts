import pg from 'pg';

type Query = (...args: unknown[]) => unknown;

/**
 * Every query text the in-process server sends while `fn` runs (the shared server shares this
 * process; every Sequelize and raw query is one call of `pg`'s `Client#query`: one round trip).
 */
export async function queriesDuring(fn: () => Promise<void>): Promise<string[]> {
  const texts: string[] = [];
  const proto = pg.Client.prototype as unknown as { query: Query };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string } | undefined;
    texts.push(typeof first === 'string' ? first : (first?.text ?? ''));
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  // The shared server's purge job (every PURGE_INTERVAL_MS) may fire meanwhile: not the request's.
  return texts
    .map((t) => t.replace(/\s+/g, ' ').trim())
    .filter((t) => !t.startsWith('SET LOCAL enable_seqscan'));
}
