import { type HttpResult, http } from './http.js';

/**
 * A raw tRPC v11 HTTP call without a transformer: a query is `GET /trpc/<path>?input=<JSON>`,
 * a mutation is `POST /trpc/<path>` with the input as JSON body.
 */
export function trpcQuery(
  path: string,
  input: unknown,
  headers: Record<string, string> = {},
): Promise<HttpResult> {
  const query = input === undefined ? '' : `?input=${encodeURIComponent(JSON.stringify(input))}`;
  return http('GET', `/trpc/${path}${query}`, { headers });
}

export function trpcMutation(
  path: string,
  input: unknown,
  headers: Record<string, string> = {},
): Promise<HttpResult> {
  return http('POST', `/trpc/${path}`, { headers, body: input ?? {} });
}
