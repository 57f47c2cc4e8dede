import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';
import type { ErrorKind } from '../core/errors.js';

/** Every kind an answer can fail with: the domain's, plus `internal` for anything unforeseen. */
export type FailureKind = ErrorKind | 'internal';

interface Row {
  /** HTTP status on both transports. */
  status: number;
  /** The envelope's business code (CONTRACT section 6). */
  code: number;
  /** The TRPCError code the tRPC transport carries. */
  trpc: TRPC_ERROR_CODE_KEY;
  /** Headers every answer of this kind has, whatever the error says. */
  headers?: Record<string, string>;
}

/**
 * The one table of CONTRACT section 6. Everything else derives from it: the HTTP status and business
 * code of an error, its tRPC code, and the way back from a stored business code to its kind when a
 * failure is replayed.
 */
export const ERROR_TABLE: Readonly<Record<FailureKind, Row>> = {
  validation: { status: 400, code: 400, trpc: 'BAD_REQUEST' },
  unauthenticated: {
    status: 401,
    code: 401,
    trpc: 'UNAUTHORIZED',
    headers: { 'WWW-Authenticate': 'Bearer' },
  },
  forbidden: { status: 403, code: 403, trpc: 'FORBIDDEN' },
  not_found: { status: 404, code: 404, trpc: 'NOT_FOUND' },
  method_not_allowed: { status: 405, code: 405, trpc: 'METHOD_NOT_SUPPORTED' },
  key_reused: { status: 409, code: 40901, trpc: 'CONFLICT' },
  business_key_reused: { status: 409, code: 40902, trpc: 'CONFLICT' },
  state_conflict: { status: 409, code: 40903, trpc: 'CONFLICT' },
  unique_taken: { status: 409, code: 40904, trpc: 'CONFLICT' },
  key_expired: { status: 409, code: 40905, trpc: 'CONFLICT' },
  refund_exceeds: { status: 409, code: 40906, trpc: 'CONFLICT' },
  payload_too_large: { status: 413, code: 413, trpc: 'PAYLOAD_TOO_LARGE' },
  unsupported_media_type: { status: 415, code: 415, trpc: 'UNSUPPORTED_MEDIA_TYPE' },
  too_many_in_flight: { status: 429, code: 42901, trpc: 'TOO_MANY_REQUESTS' },
  too_many_retained: { status: 429, code: 42902, trpc: 'TOO_MANY_REQUESTS' },
  unavailable: { status: 503, code: 503, trpc: 'SERVICE_UNAVAILABLE' },
  internal: { status: 500, code: 500, trpc: 'INTERNAL_SERVER_ERROR' },
};

const KINDS = Object.keys(ERROR_TABLE) as FailureKind[];

/** The kind a stored business code stands for (codes are unique per kind), or internal. */
export function kindOfCode(code: number): FailureKind {
  return KINDS.find((kind) => ERROR_TABLE[kind].code === code) ?? 'internal';
}

/** The first kind carrying a tRPC code (for errors tRPC itself raises, e.g. a malformed body). */
export function kindOfTrpcCode(trpc: TRPC_ERROR_CODE_KEY): FailureKind {
  if (trpc === 'PARSE_ERROR') return 'validation';
  return KINDS.find((kind) => ERROR_TABLE[kind].trpc === trpc) ?? 'internal';
}
