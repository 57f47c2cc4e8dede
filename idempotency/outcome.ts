import type { DomainError } from '../core/errors.js';

/**
 * An answer as the protocol stores and replays it. The engine treats status, headers and body as
 * opaque values chosen by the layer above (routers/), except for the protocol's own parts: the 202 of
 * a request still in flight and the replay marker.
 */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** What the idempotency protocol did with one request, and what its client is told. */
export type Outcome =
  /** This request ran the operation. */
  | { kind: 'executed'; reply: Reply }
  /** It continued an attempt someone else abandoned (payments) and finished it. */
  | { kind: 'lease_takeover'; reply: Reply }
  /** The stored answer of an earlier request: a success, or a final failure (status >= 400). */
  | { kind: 'replayed'; reply: Reply }
  /** 202: the first request with this key is still running. */
  | { kind: 'in_flight'; reply: Reply }
  /** A failure the request caused: stored, and replayed to every retry. */
  | { kind: 'failed_final'; error: unknown }
  /** The key was used before with another request (409, 40901). */
  | { kind: 'mismatch'; error: DomainError }
  /** A per-user cap refused it (429). */
  | { kind: 'limited'; error: DomainError }
  /** A transient failure: nothing was kept, a retry with the same key executes. */
  | { kind: 'rolled_back'; error: unknown }
  /** Payments: certainly not charged (503); a retry with the same key executes again. */
  | { kind: 'failed_retryable'; error: DomainError };

export type OutcomeKind = Outcome['kind'];
