/**
 * What went wrong, as a kind the domain understands. Code below routers/ throws these and never
 * speaks HTTP or tRPC: routers/error-table.ts is the one place that gives a kind its HTTP status,
 * business code and tRPC code.
 */
export type ErrorKind =
  | 'validation'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'key_reused'
  | 'business_key_reused'
  | 'state_conflict'
  | 'unique_taken'
  | 'key_expired'
  | 'refund_exceeds'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'too_many_in_flight'
  | 'too_many_retained'
  | 'unavailable';

export interface ErrorDetails {
  /** Seconds the client should wait before retrying (a Retry-After header). */
  retryAfterSeconds?: number;
  /** Methods the path supports (an Allow header). */
  allow?: readonly string[];
  /** 40901: JSON pointers of the body fields that differ from the first request under the key. */
  mismatch?: readonly string[];
}

export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly details: ErrorDetails = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** `<field>: <message>`, the form of CONTRACT section 6. */
export class ValidationError extends DomainError {
  constructor(field: string, message: string) {
    super('validation', field ? `${field}: ${message}` : message);
  }
}
export class Unauthorized extends DomainError {
  constructor(message = 'Authentication required') {
    super('unauthenticated', message);
  }
}
export class Forbidden extends DomainError {
  constructor(message = 'Forbidden') {
    super('forbidden', message);
  }
}
export class NotFound extends DomainError {
  constructor(message = 'Not found') {
    super('not_found', message);
  }
}
export class MethodNotAllowed extends DomainError {
  constructor(allow: readonly string[]) {
    super('method_not_allowed', 'Method not allowed', { allow });
  }
}
export class Conflict extends DomainError {
  constructor(
    kind: 'key_reused' | 'business_key_reused' | 'state_conflict' | 'unique_taken' | 'refund_exceeds',
    message: string,
    details: ErrorDetails = {},
  ) {
    super(kind, message, details);
  }
}
/** 40905: the key's record was purged (a tombstone); the key is dead, nothing is executed or stored. */
export class KeyExpired extends DomainError {
  constructor() {
    super(
      'key_expired',
      'Idempotency-Key expired: its first result is no longer available; send a new key for a new operation',
    );
  }
}
export class PayloadTooLarge extends DomainError {
  constructor(limit: number) {
    super('payload_too_large', `Request body larger than ${limit} bytes`);
  }
}
export class UnsupportedMediaType extends DomainError {
  constructor() {
    super('unsupported_media_type', 'Content-Type must be application/json');
  }
}
export class TooManyRequests extends DomainError {
  constructor(kind: 'too_many_in_flight' | 'too_many_retained', message: string, retryAfterSeconds: number) {
    super(kind, message, { retryAfterSeconds });
  }
}
export class ServiceUnavailable extends DomainError {
  constructor(message: string, retryAfterSeconds = 1) {
    super('unavailable', message, { retryAfterSeconds });
  }
}
