// Shapes of the payment gateway contract (CONTRACT.md section 9), shared by the simulator, the
// client and the service. Amounts are decimal strings so that no float ever touches money.

export type ChargeStatus = 'SUCCEEDED' | 'DECLINED';

export interface Charge {
  paymentNo: string;
  chargeId: string;
  amount: string;
  currency: string;
  status: ChargeStatus;
}

/** A compensation: one whole charge undone (POST /refunds without a refundNo). */
export interface Refund {
  paymentNo: string;
  chargeId: string;
  refundId: string;
}

export type RefundStatus = 'SUCCEEDED' | 'DECLINED';

/** A business refund (POST /refunds with a refundNo): part or all of one charge. */
export interface BusinessRefund {
  refundNo: string;
  refundId: string;
  paymentNo: string;
  chargeId: string;
  amount: string;
  currency: string;
  status: RefundStatus;
}

/** A ledger's refund entry: the business fields are present only for business refunds. */
export interface LedgerRefund extends Refund {
  refundNo?: string;
  amount?: string;
  currency?: string;
  status?: RefundStatus;
}

/** Simulator fault set; a field that is absent is off. Rates are probabilities 0..1. */
export interface Faults {
  latencyMs?: number;
  errorRate?: number;
  timeoutAfterChargeRate?: number;
  resetAfterChargeRate?: number;
  declineRate?: number;
  ignoreIdempotencyKey?: boolean;
}

/** Every charge and refund the simulator ever made, in order (a paymentNo charged twice appears twice). */
export interface Ledger {
  charges: Charge[];
  refunds: LedgerRefund[];
}

export interface ChargeRequest {
  paymentNo: string;
  amount: string;
  currency: string;
}

export interface RefundRequest {
  refundNo: string;
  paymentNo: string;
  chargeId: string;
  amount: string;
  currency: string;
}

/**
 * Why an attempt may or may not have reached the gateway. 'aborted' is the caller's signal: before
 * sending, nothing was sent; after, the request may have arrived.
 */
export type UnknownReason = 'timeout' | 'reset' | 'bad-response' | 'aborted';
export type NotDoneReason = 'refused' | 'server-error' | 'rejected' | 'aborted';

/**
 * What a charge attempt tells the caller. 'unknown' means the request may have reached the gateway:
 * the caller must query before charging again or giving up. 'not-charged' is only ever returned
 * when nothing can have been charged (refused connection, a 5xx answer, or a 4xx rejection of the
 * request: the gateway processed nothing).
 */
export type ChargeOutcome =
  | { kind: 'charged'; charge: Charge }
  | { kind: 'declined'; charge: Charge }
  | { kind: 'unknown'; reason: UnknownReason }
  | { kind: 'not-charged'; reason: NotDoneReason };

export type QueryOutcome = { kind: 'found'; charge: Charge } | { kind: 'none' } | { kind: 'unavailable' };

/** What a business refund attempt tells the caller: the same four cases as a charge. */
export type RefundOutcome =
  | { kind: 'refunded'; refund: BusinessRefund }
  | { kind: 'declined'; refund: BusinessRefund }
  | { kind: 'unknown'; reason: UnknownReason }
  | { kind: 'not-refunded'; reason: NotDoneReason };

export type RefundQueryOutcome =
  | { kind: 'found'; refund: BusinessRefund }
  | { kind: 'none' }
  | { kind: 'unavailable' };

export interface GatewayClient {
  charge(req: ChargeRequest, signal?: AbortSignal): Promise<ChargeOutcome>;
  query(paymentNo: string, signal?: AbortSignal): Promise<QueryOutcome>;
  /** A business refund, sent with `Idempotency-Key: refundNo` (throws GatewayError on a 4xx, as charge). */
  refund(req: RefundRequest, signal?: AbortSignal): Promise<RefundOutcome>;
  /** The compensation form: undoes one whole charge (throws GatewayError on any failure). */
  refund(paymentNo: string, chargeId: string): Promise<Refund>;
  queryRefund(refundNo: string, signal?: AbortSignal): Promise<RefundQueryOutcome>;
  /** Simulator only. */
  ledger(): Promise<Ledger>;
  /** Simulator only: replaces the whole fault set and returns the active one. */
  setFaults(faults: Faults): Promise<Faults>;
  close(): Promise<void>;
}
