import { TRPCError } from '@trpc/server';
import { ZodError } from 'zod';
import { isDatabaseBusy, isDatabaseUnavailable } from '../core/db-errors.js';
import type { Envelope } from '../core/envelope.js';
import { DomainError, type ErrorDetails } from '../core/errors.js';
import { ERROR_TABLE, type FailureKind, kindOfTrpcCode } from './error-table.js';

/** What any thrown value becomes on the wire, for both transports. */
export interface ErrorAnswer {
  kind: FailureKind;
  status: number;
  headers: Record<string, string>;
  body: Envelope<{ mismatch: readonly string[] } | null>;
  /** Not the client's fault: the details belong in the log only. */
  internal: boolean;
}

/**
 * Computed once per error object: the tRPC error formatter, both responseMeta hooks, the REST body and
 * the access log all ask about the same error, and must all get the same answer.
 */
const answered = new WeakMap<object, ErrorAnswer>();

export function errorAnswer(err: unknown): ErrorAnswer {
  if (typeof err !== 'object' || err === null) return answerOf('internal', 'Internal server error');
  let answer = answered.get(err);
  if (!answer) {
    answer = compute(err);
    answered.set(err, answer);
  }
  return answer;
}

/**
 * The TRPCError both transports carry for an error: its code from the table, the error itself as the
 * cause (so the formatter and the REST body find the same answer).
 */
export function toTrpcError(err: unknown): TRPCError {
  if (err instanceof TRPCError) return err;
  const answer = errorAnswer(err);
  const trpcError = new TRPCError({
    code: ERROR_TABLE[answer.kind].trpc,
    message: answer.body.message,
    cause: err,
  });
  answered.set(trpcError, answer);
  return trpcError;
}

/** `<field path>: <message>` of the first failing field (CONTRACT section 6). */
export function zodMessage(error: ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'Invalid input';
  // The whole input is not an object (a tRPC body or `?input=` of 42, "x" or []): no field to name,
  // so the input itself, in the words REST uses for such a body (server/rest.ts).
  if (issue.path.length === 0 && issue.code === 'invalid_type' && issue.expected === 'object') {
    return 'input: must be a JSON object';
  }
  // An unknown key fails at the object's level: name the key itself, as for any other field.
  const at = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]] : issue.path;
  const path = at.map(String).join('.');
  return path ? `${path}: ${issue.message}` : issue.message;
}

function compute(err: unknown): ErrorAnswer {
  const cause = rootCause(err);
  if (cause instanceof DomainError) return answerOf(cause.kind, cause.message, cause.details);
  if (cause instanceof ZodError) return answerOf('validation', zodMessage(cause));
  if (err instanceof TRPCError && err.code !== 'INTERNAL_SERVER_ERROR') {
    // Raised by tRPC itself (a malformed body, an unknown procedure, a body over the limit).
    const kind = kindOfTrpcCode(err.code);
    if (kind !== 'internal')
      return answerOf(kind, err.code === 'PARSE_ERROR' ? 'body: malformed JSON' : err.message);
  }
  if (isDatabaseUnavailable(err)) {
    // Nothing was committed (the transaction failed with the connection): safe to retry, same key.
    return answerOf('unavailable', 'Database unavailable; retry with the same Idempotency-Key', {
      retryAfterSeconds: 1,
    });
  }
  if (isDatabaseBusy(err)) {
    // A bounded wait ended (lock_timeout on a row another transaction holds, a deadlock): rolled back.
    return answerOf('unavailable', 'Database busy; retry with the same Idempotency-Key', {
      retryAfterSeconds: 1,
    });
  }
  return answerOf('internal', 'Internal server error');
}

/** Unwraps TRPCError causes down to the domain error or ZodError that started it. */
function rootCause(err: unknown): unknown {
  let current = err;
  for (let i = 0; i < 5 && current instanceof TRPCError && current.cause; i++) current = current.cause;
  return current;
}

function answerOf(kind: FailureKind, message: string, details: ErrorDetails = {}): ErrorAnswer {
  const row = ERROR_TABLE[kind];
  const headers: Record<string, string> = { ...row.headers };
  if (details.retryAfterSeconds !== undefined) headers['Retry-After'] = String(details.retryAfterSeconds);
  if (details.allow) headers.Allow = details.allow.join(', ');
  return {
    kind,
    status: row.status,
    headers,
    body: { code: row.code, message, data: details.mismatch ? { mismatch: details.mismatch } : null },
    internal: kind === 'internal',
  };
}
