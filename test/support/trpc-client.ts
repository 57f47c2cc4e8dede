import { createTRPCClient, httpLink } from '@trpc/client';
import type { AppRouter } from '../../routers/index.js';

/**
 * A typed tRPC client over HTTP (httpLink: the server refuses batches) that keeps the last HTTP
 * answer, so tests can read the status and headers (Location, Retry-After, Idempotent-Replayed) of
 * tRPC calls too.
 */
export function trpcClient(baseUrl: string, headers: Record<string, string>) {
  const last: { status: number; headers: Headers } = { status: 0, headers: new Headers() };
  const client = createTRPCClient<AppRouter>({
    links: [
      httpLink({
        url: `${baseUrl}/trpc`,
        headers,
        fetch: async (url, init) => {
          const res = await fetch(url, init as RequestInit);
          last.status = res.status;
          last.headers = res.headers;
          return res;
        },
      }),
    ],
  });
  return { client, last };
}
