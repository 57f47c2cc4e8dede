import { TRPCError } from '@trpc/server';
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';
import { ZodError } from 'zod';

/** The response envelope of CONTRACT section 2. */
export interface Envelope<T = unknown> {
  code: number;
  message: string;
  data: T;
}

export type HeaderMap = Record<string, string>;

/**
 * A domain error: code below the routers throws these and never speaks HTTP or tRPC.
 * `status` is the HTTP status both transports answer with; `code` is the business code.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
    readonly headers: HeaderMap = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationError extends AppError {
  constructor(field: string, message: string) {
    super(400, 400, field ? `${field}: ${message}` : message);
  }
}
export class Unauthorized extends AppError {
  constructor(message = 'Authentication required') {
    super(401, 401, message, { 'WWW-Authenticate': 'Bearer' });
  }
}
export class Forbidden extends AppError {
  constructor(message = 'Forbidden') {
    super(403, 403, message);
  }
}
export class NotFound extends AppError {
  constructor(message = 'Not found') {
    super(404, 404, message);
  }
}
export class MethodNotAllowed extends AppError {
  constructor(allow: string[]) {
    super(405, 405, 'Method not allowed', { Allow: allow.join(', ') });
  }
}
export const ConflictCode = {
  IdempotencyKeyReused: 40901,
  BusinessKeyReused: 40902,
  StateConflict: 40903,
  UniqueTaken: 40904,
} as const;
export class Conflict extends AppError {
  constructor(code: (typeof ConflictCode)[keyof typeof ConflictCode], message: string) {
    super(409, code, message);
  }
}
export class PayloadTooLarge extends AppError {
  constructor(limit: number) {
    super(413, 413, `Request body larger than ${limit} bytes`);
  }
}
export class UnsupportedMediaType extends AppError {
  constructor() {
    super(415, 415, 'Content-Type must be application/json');
  }
}
export class TooManyRequests extends AppError {
  constructor(code: 42901 | 42902, message: string, retryAfterSeconds: number) {
    super(429, code, message, { 'Retry-After': String(retryAfterSeconds) });
  }
}
export class ServiceUnavailable extends AppError {
  constructor(message: string, retryAfterSeconds = 1) {
    super(503, 503, message, { 'Retry-After': String(retryAfterSeconds) });
  }
}
/** A stored answer replayed verbatim (idempotency FAILED_FINAL): same status, same body. */
export class ReplayedError extends AppError {
  constructor(
    status: number,
    readonly body: Envelope<null>,
    headers: HeaderMap,
  ) {
    super(status, body.code, body.message, headers);
  }
}

const TRPC_CODE_BY_STATUS: Record<number, TRPC_ERROR_CODE_KEY> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_SUPPORTED',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'TOO_MANY_REQUESTS',
  503: 'SERVICE_UNAVAILABLE',
};

export function trpcCodeFor(status: number): TRPC_ERROR_CODE_KEY {
  return TRPC_CODE_BY_STATUS[status] ?? 'INTERNAL_SERVER_ERROR';
}

/** Turns a domain error into the TRPCError both transports carry (the cause keeps the domain error). */
export function toTrpcError(err: AppError): TRPCError {
  return new TRPCError({ code: trpcCodeFor(err.status), message: err.message, cause: err });
}

/** `<field path>: <message>` of the first failing field (CONTRACT section 6). */
export function zodMessage(error: ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'Invalid input';
  // An unknown key fails at the object's level: name the key itself, as for any other field.
  const at = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]] : issue.path;
  const path = at.map(String).join('.');
  return path ? `${path}: ${issue.message}` : issue.message;
}

export interface ErrorResponse {
  status: number;
  body: Envelope<null>;
  headers: HeaderMap;
  /** true when the error is not the client's fault and details belong in the log only. */
  internal: boolean;
}

const TRPC_STATUS: Partial<Record<TRPC_ERROR_CODE_KEY, number>> = {
  BAD_REQUEST: 400,
  PARSE_ERROR: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_SUPPORTED: 405,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  TOO_MANY_REQUESTS: 429,
  SERVICE_UNAVAILABLE: 503,
};

const UNAVAILABLE_ERROR_NAMES = new Set([
  'SequelizeConnectionError',
  'SequelizeConnectionRefusedError',
  'SequelizeConnectionTimedOutError',
  'SequelizeConnectionAcquireTimeoutError',
  'SequelizeHostNotReachableError',
  'SequelizeHostNotFoundError',
]);
// Connection exceptions (08*), server shutting down or starting (57P01-57P03), too many connections.
const UNAVAILABLE_PG_CODE = /^(08...|57P0[123]|53300)$/;

/** The database could not be reached or dropped the connection: 503, never a 500. */
export function isDatabaseUnavailable(err: unknown): boolean {
  let current = err as
    | { name?: unknown; code?: unknown; cause?: unknown; parent?: unknown; message?: unknown }
    | undefined;
  for (let i = 0; i < 8 && current; i++) {
    if (typeof current.name === 'string' && UNAVAILABLE_ERROR_NAMES.has(current.name)) return true;
    if (
      typeof current.code === 'string' &&
      (UNAVAILABLE_PG_CODE.test(current.code) || current.code === 'ECONNREFUSED')
    ) {
      return true;
    }
    if (
      typeof current.message === 'string' &&
      /Connection terminated|connection is closed|not queryable|ECONNRESET|terminating connection/i.test(
        current.message,
      )
    ) {
      return true;
    }
    current = (current.cause ?? current.parent) as typeof current;
  }
  return false;
}

/** Unwraps TRPCError causes down to the domain error or ZodError that started it. */
function rootCause(err: unknown): unknown {
  let current = err;
  for (let i = 0; i < 5 && current instanceof TRPCError && current.cause; i++) current = current.cause;
  return current;
}

/**
 * The one place where any thrown value becomes an answer, for REST (the envelope) and tRPC
 * (the error formatter reads the same result).
 */
export function toErrorResponse(err: unknown): ErrorResponse {
  const cause = rootCause(err);
  if (cause instanceof ReplayedError) {
    return { status: cause.status, body: cause.body, headers: cause.headers, internal: false };
  }
  if (cause instanceof AppError) {
    return {
      status: cause.status,
      body: { code: cause.code, message: cause.message, data: null },
      headers: cause.headers,
      internal: false,
    };
  }
  if (cause instanceof ZodError) {
    return {
      status: 400,
      body: { code: 400, message: zodMessage(cause), data: null },
      headers: {},
      internal: false,
    };
  }
  if (err instanceof TRPCError && err.code !== 'INTERNAL_SERVER_ERROR') {
    const status = TRPC_STATUS[err.code] ?? 500;
    if (status !== 500) {
      const message = err.code === 'PARSE_ERROR' ? 'body: malformed JSON' : err.message;
      return { status, body: { code: status, message, data: null }, headers: {}, internal: false };
    }
  }
  if (isDatabaseUnavailable(err)) {
    // Nothing was committed (the transaction failed with the connection): safe to retry, same key.
    return {
      status: 503,
      body: { code: 503, message: 'Database unavailable; retry with the same Idempotency-Key', data: null },
      headers: { 'Retry-After': '1' },
      internal: false,
    };
  }
  return {
    status: 500,
    body: { code: 500, message: 'Internal server error', data: null },
    headers: {},
    internal: true,
  };
}
