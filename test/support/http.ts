import { sharedServer } from './server.js';

export interface HttpResult {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/** A real HTTP request to the shared server (or another base URL). Body objects are sent as JSON. */
export async function http(
  method: string,
  path: string,
  opts: { body?: unknown; headers?: Record<string, string>; raw?: string; baseUrl?: string } = {},
): Promise<HttpResult> {
  const base = opts.baseUrl ?? (await sharedServer()).url;
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  let payload: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    payload = JSON.stringify(opts.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body: payload });
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}
