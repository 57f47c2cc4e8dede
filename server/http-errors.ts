import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import {
  DomainError,
  NotFound,
  PayloadTooLarge,
  UnsupportedMediaType,
  ValidationError,
} from '../core/errors.js';
import { errorAnswer } from '../routers/error-answer.js';

/**
 * The media type of every JSON answer, exactly (CONTRACT section 2), as the procedures' answers carry
 * it: no `charset` parameter, which JSON does not define (RFC 8259: always UTF-8) and which Express's
 * `res.json()` would add. So no REST answer goes out through `res.json()`: only through writeJson.
 */
const JSON_MEDIA_TYPE = 'application/json';

/**
 * A JSON answer on a plain node response (Express's `res.status().set().json()` without Express: the
 * REST front answers outside it; Express's routes answer through it too, for the media type). A 204,
 * or no body, ends without one; HEAD drops the body in node.
 */
export function writeJson(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: unknown,
): void {
  if (status === 204 || body === undefined) {
    res.statusCode = status;
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    res.end();
    return;
  }
  writeJsonText(res, status, headers, JSON.stringify(body));
}

/** writeJson for a body already serialised (a replay's stored bytes, sent as they are). */
export function writeJsonText(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  json: string,
): void {
  res.statusCode = status;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', JSON_MEDIA_TYPE);
  res.end(json);
}

/** An error answered outside the procedures (routing, body reading), from the same error table. */
export function sendError(res: ServerResponse, err: unknown): void {
  const answer = errorAnswer(err);
  writeJson(res, answer.status, answer.headers, answer.body);
}

export function notFoundHandler(_req: IncomingMessage, res: ServerResponse): void {
  sendError(res, new NotFound('No such path'));
}

/**
 * Any other 400 from the body reader (e.g. `Content-Encoding: gzip` over bytes that are not gzip: a
 * zlib error without a body-parser `type`) is the client's fault, not a 500.
 */
function isClientBodyError(err: unknown): boolean {
  const e = err as { status?: unknown; expose?: unknown } | null;
  return e?.status === 400 && e.expose === true;
}

/**
 * A failure of the body reader (body-parser) as its contract error; anything else unchanged, and
 * logged when it is not a domain error (it will be a 500).
 */
export function bodyReadError(err: unknown, logger: Logger, limit: number): unknown {
  const type = (err as { type?: string })?.type;
  if (type === 'entity.too.large') return new PayloadTooLarge(limit);
  if (type === 'entity.parse.failed') return new ValidationError('body', 'malformed JSON');
  if (type === 'charset.unsupported' || type === 'encoding.unsupported') return new UnsupportedMediaType();
  if (type === 'request.aborted') return new ValidationError('body', 'request aborted');
  if (isClientBodyError(err)) return new ValidationError('body', 'could not be read');
  if (!(err instanceof DomainError)) logger.error({ err }, 'unhandled error');
  return err;
}

/** Body-parser failures become their contract statuses; anything else is a generic 500. */
export function errorHandler(logger: Logger, limit: number) {
  return (err: unknown, _req: IncomingMessage, res: ServerResponse, _next: (err?: unknown) => void) => {
    const mapped = bodyReadError(err, logger, limit);
    if (res.headersSent) return;
    sendError(res, mapped);
  };
}

/**
 * Requests Node's HTTP parser refuses never reach the app: a malformed request line or header, bad
 * chunked framing, both Content-Length and Transfer-Encoding, headers over 16 KB, a request not
 * complete within `requestTimeout`. Node answered them with a bare status line; the same statuses,
 * chosen as Node chooses them (lib/_http_server.js socketOnError), now carry the envelope (CONTRACT
 * section 2). As there, nothing is written on a socket that cannot take it or whose answer has
 * begun, and the connection is closed: the parser cannot go on after an error.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const begun = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && !begun?.headersSent) {
    const [status, message] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request header fields too large']
        : err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
          ? [413, 'Chunk extensions too large']
          : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? [408, 'Request not received in time']
            : [400, 'Malformed HTTP request'];
    const body = JSON.stringify({ code: status, message, data: null });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    return;
  }
  socket.destroy();
}

/** An `Expect` other than 100-continue (Node's own answer is a bare 417): 417 in the envelope. */
export function answerExpectation(_req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  writeJson(
    res,
    417,
    {},
    { code: 417, message: 'Expectation failed: only 100-continue is supported', data: null },
  );
}
