/**
 * `work`'s result, or 'late' when it has not settled within `ms`: a bounded wait at shutdown (the
 * NATS drain, the webhook attempts in flight). The timer is cleared either way; `work` goes on.
 */
export async function within<T>(work: Promise<T>, ms: number): Promise<T | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
