// The gateway client's HTTP transport: one request, one classified result (CONTRACT.md section 9).
//
// Why node:http(s) with an Agent({keepAlive: true}) rather than the global fetch: fetch's pool (undici's
// global dispatcher) is shared by the whole process and cannot be closed without importing undici,
// which is not a dependency; and fetch folds every transport failure into one "fetch failed"
// TypeError, whereas here each failure keeps its own error code, which decides whether a charge may
// have happened (a refused connection sent nothing; a reset after connecting may have charged).
import http from 'node:http';
import https from 'node:https';

export type Sent =
  | { ok: true; status: number; text: string }
  | { ok: false; failure: 'refused' | 'timeout' | 'reset' | 'aborted' | 'not-sent' };

export interface HttpTransport {
  send(
    method: string,
    path: string,
    body?: unknown,
    headers?: http.OutgoingHttpHeaders,
    signal?: AbortSignal,
  ): Promise<Sent>;
  close(): void;
}

/** ECONNREFUSED comes only from connect(), so nothing was sent. With several addresses (e.g. "localhost")
 * Node reports an AggregateError; it is a refusal only when every address refused. */
function isRefused(err: unknown): boolean {
  if (err instanceof AggregateError) return err.errors.length > 0 && err.errors.every(isRefused);
  return (err as NodeJS.ErrnoException | null)?.code === 'ECONNREFUSED';
}

export function createHttpTransport(opts: { baseUrl: string; timeoutMs: number }): HttpTransport {
  const base = new URL(opts.baseUrl);
  if (base.protocol !== 'http:' && base.protocol !== 'https:')
    throw new Error('payment gateway URL must be http: or https:');
  if (!Number.isFinite(opts.timeoutMs) || opts.timeoutMs <= 0) throw new Error('timeoutMs must be positive');
  const prefix = base.pathname.replace(/\/+$/, '');
  const transport = base.protocol === 'https:' ? https : http;
  // Idle sockets are closed after 4 s, before the usual 5 s server keep-alive time-out (Node also honours
  // a shorter Keep-Alive hint): reusing a socket the server is closing would turn a sure answer into a
  // reset, i.e. an "unknown" charge. No maxSockets: time spent queued for a socket would count against
  // timeoutMs and end as "unknown" although nothing was sent.
  const agent = new transport.Agent({ keepAlive: true, timeout: 4000 });

  function send(
    method: string,
    path: string,
    body?: unknown,
    headers: http.OutgoingHttpHeaders = {},
    signal?: AbortSignal,
  ): Promise<Sent> {
    // Checked before any request exists: only then is "nothing was sent" certain.
    if (signal?.aborted) return Promise.resolve({ ok: false, failure: 'not-sent' });
    return new Promise<Sent>((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (result: Sent) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(result);
      };
      // Aborted once the request exists: bytes may have left, so the outcome is unknown, as after a time-out.
      const onAbort = () => {
        finish({ ok: false, failure: 'aborted' });
        req.destroy();
      };
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const url = new URL(base);
      url.pathname = prefix + path;
      const req = transport.request(url, {
        method,
        agent,
        headers: {
          ...headers,
          accept: 'application/json',
          ...(payload === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      // One deadline for connect, send and the whole answer, so a gateway that hangs at any stage still
      // yields an outcome within timeoutMs. Destroying the request also drops its socket from the pool.
      timer = setTimeout(() => {
        finish({ ok: false, failure: 'timeout' });
        req.destroy();
      }, opts.timeoutMs);
      req.on('error', (err) => finish({ ok: false, failure: isRefused(err) ? 'refused' : 'reset' }));
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          finish({ ok: true, status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        // The connection dropped in the middle of the answer: the gateway may well have acted.
        res.on('error', () => finish({ ok: false, failure: 'reset' }));
        res.on('close', () => {
          if (!res.complete) finish({ ok: false, failure: 'reset' });
        });
      });
      req.end(payload);
    });
  }

  return { send, close: () => agent.destroy() };
}
