import { sharedServer } from './server.js';

/** One answer seen by http(): the whole suite's REST answers, checked against /openapi.json at the end. */
export interface RecordedCall {
  method: string;
  /** The request path as sent, query string included. */
  path: string;
  baseUrl: string;
  status: number;
  headers: Record<string, string>;
  body: unknown;
  text: string;
}

/** Every call made through http() in this process, in order (append-only). */
export const recordedCalls: RecordedCall[] = [];

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
  opts: {
    body?: unknown;
    headers?: Record<string, string>;
    raw?: string;
    baseUrl?: string;
    signal?: AbortSignal;
  } = {},
): Promise<HttpResult> {
  const base = opts.baseUrl ?? (await sharedServer()).url;
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  let payload: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    payload = JSON.stringify(opts.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body: payload, signal: opts.signal });
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  recordedCalls.push({
    method: method.toUpperCase(),
    path,
    baseUrl: base,
    status: res.status,
    headers: Object.fromEntries(res.headers),
    body,
    text,
  });
  return { status: res.status, headers: res.headers, body, text };
}
