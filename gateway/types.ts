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

export interface Refund {
  paymentNo: string;
  chargeId: string;
  refundId: string;
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
  refunds: Refund[];
}

export interface ChargeRequest {
  paymentNo: string;
  amount: string;
  currency: string;
}

/**
 * What a charge attempt tells the caller. 'unknown' means the request may have reached the gateway:
 * the caller must query before charging again or giving up. 'not-charged' is only ever returned
 * when nothing can have been charged (refused connection, a 5xx answer, or a 4xx rejection of the
 * request: the gateway processed nothing).
 */
export type ChargeOutcome =
  | { kind: 'charged'; charge: Charge }
  | { kind: 'declined'; charge: Charge }
  | { kind: 'unknown'; reason: 'timeout' | 'reset' | 'bad-response' }
  | { kind: 'not-charged'; reason: 'refused' | 'server-error' | 'rejected' };

export type QueryOutcome = { kind: 'found'; charge: Charge } | { kind: 'none' } | { kind: 'unavailable' };

export interface GatewayClient {
  charge(req: ChargeRequest): Promise<ChargeOutcome>;
  query(paymentNo: string): Promise<QueryOutcome>;
  refund(paymentNo: string, chargeId: string): Promise<Refund>;
  /** Simulator only. */
  ledger(): Promise<Ledger>;
  /** Simulator only: replaces the whole fault set and returns the active one. */
  setFaults(faults: Faults): Promise<Faults>;
  close(): Promise<void>;
}
