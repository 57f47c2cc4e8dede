import { ok } from '../core/envelope.js';
import type { LocalResult, LocalStatement } from '../idempotency/engine.js';
import type { Outcome, Reply } from '../idempotency/outcome.js';
import type { AuthedContext } from './context.js';
import { errorAnswer } from './error-answer.js';
import type { BusinessStatement, Success } from './mutation-definition.js';

type Declares = { success: Success | { status: 204 }; output?: unknown };

/** The reply of a success, and the resource id a create stores with its record. */
export function successOf(
  def: Declares,
  data: { id: string } | void,
): { reply: Reply; resourceId: string | null } {
  const location = 'location' in def.success ? def.success.location : undefined;
  const resourceId = location && data ? data.id : null;
  const headers: Record<string, string> = location && resourceId ? { Location: location(resourceId) } : {};
  const body = 'output' in def ? ok(data) : undefined;
  return { reply: { status: def.success.status, headers, body }, resourceId };
}

/** A business statement as the engine's Mode A work (its answer, when known before the write). */
export function statementWork<D extends { id: string }>(
  def: Declares,
  statement: BusinessStatement<D>,
): LocalStatement {
  const known = statement.answer;
  return {
    sql: statement.sql,
    settle: (rows) => ({ ok: true, ...successOf(def, statement.result(rows)) }),
    fail: (err) => failureAsResult(statement.error(err)),
    ...(known === undefined ? {} : { answer: { ok: true, ...successOf(def, known) } }),
  };
}

/**
 * A failure the request caused (4xx: a retry would fail the same way) becomes the reply the engine
 * stores and replays. Anything else (5xx, 429, unknown) is thrown on: the engine rolls back, and a
 * retry with the same key executes.
 */
export async function failureAsReply(
  work: Promise<{ reply: Reply; resourceId: string | null }>,
): Promise<LocalResult> {
  try {
    return { ok: true, ...(await work) };
  } catch (err) {
    return failureAsResult(err);
  }
}

/** A failure the request caused, as the result the engine stores; any other is thrown on. */
function failureAsResult(err: unknown): LocalResult {
  const reply = failureReply(err);
  if (reply.status < 400 || reply.status >= 500 || reply.status === 408 || reply.status === 429) throw err;
  return { ok: false, error: err, reply };
}

/** A failure as it is stored: its status and error envelope (no header of it is replayed). */
export function failureReply(err: unknown): Reply {
  const { status, body } = errorAnswer(err);
  return { status, headers: {}, body };
}

export function counted(ctx: AuthedContext, operation: string, outcome: Outcome): Outcome {
  ctx.services.countOutcome(operation, outcome.kind);
  return outcome;
}
