/**
 * A recorded history of a chaos run: every request sent and what came back (or that nothing did),
 * every fault injected, and samples of the database taken while it ran. The checker reads only this
 * and the final state; nothing in it is an assertion of one particular outcome.
 */

import type { ScheduledKind } from './schedule.js';

export type Transport = 'rest' | 'trpc';
export type Operation = 'orders.create' | 'payments.create' | 'refunds.create' | 'exports.create';

/** What came back, normalised across transports (REST status + envelope, tRPC result or error). */
export type Answer =
  /** No answer: connection refused or reset, or the client's own time-out. */
  | { kind: 'lost'; reason: string }
  | { kind: 'ok'; httpStatus: number; data: unknown; replayed: boolean }
  | {
      kind: 'error';
      httpStatus: number;
      code: number;
      message: string;
      retryAfter: boolean;
      replayed: boolean;
    }
  /** 202: still processing (never final but for an export, whose 202 is the key's stored answer). */
  | { kind: 'processing'; retryAfter: boolean; location: string | null; resourceId?: string };

export interface RequestEvent {
  type: 'request';
  seq: number;
  client: number;
  tenant: string;
  user: string;
  op: Operation;
  transport: Transport;
  /** The caller's role (default user): some exports are an admin's, of the tenant's rows. */
  role?: 'admin';
  key: string;
  /**
   * Canonical JSON of the body sent (a refund's: its tRPC input, the payment's id included): a
   * "variant" is another body under the same key.
   */
  body: string;
  /** The order the request is about (a refund's: its payment's order; an export's: none, ''). */
  merchantOrderNo: string;
  instance: number;
  start: number;
  end: number;
  answer: Answer;
  /** The instance was stopped, killed or restarted while this request was open (its time is not bounded). */
  disturbed: boolean;
}

export interface FaultEvent {
  type: 'fault';
  at: number;
  /** A fault the schedule draws (test/chaos/schedule.ts), or what follows from one. */
  kind:
    | ScheduledKind
    | 'restart'
    | 'sigcont'
    /** The gateway listens again after `gateway-unreachable`. */
    | 'gateway-reachable'
    | 'gateway-heal'
    /** `npm run reconcile -- --repair` after healing (refunds of second charges), when ignore-key ran. */
    | 'reconcile-repair'
    /** A cluster's leader machine dies (test/ha), then its milestones. */
    | 'failover'
    | 'writable'
    | 'served'
    | 'rejoin'
    | 'healthy';
  instance?: number;
  detail?: string;
}

/** Committed PROCESSING records per user, sampled while the run goes on (the in-flight cap). */
export interface SampleEvent {
  type: 'sample';
  at: number;
  maxProcessingPerUser: number;
  user: string | null;
}

export type HistoryEvent = RequestEvent | FaultEvent | SampleEvent;

/** What the database and the gateway hold once the faults stopped and every client finished. */
export interface FinalState {
  processingRecords: Array<{ scopeKey: string; ageMs: number }>;
  payments: Array<{
    id: string;
    paymentNo: string;
    tenant: string;
    merchantOrderNo: string;
    status: string;
    chargeId: string | null;
    amount: string;
    resumable: boolean;
    /** The payment's amount_refunded (its SUCCEEDED refunds, CONTRACT section 10). */
    amountRefunded: string;
  }>;
  orders: Array<{ id: string; tenant: string; merchantOrderNo: string; status: string; amount: string }>;
  /** The refunds of the run's tenants (CONTRACT section 10). */
  refunds: Array<{
    id: string;
    refundNo: string;
    paymentId: string;
    tenant: string;
    status: string;
    amount: string;
    /** Why a FAILED refund failed; KEY_EXPIRED is the recoverer's closure of an expired key. */
    failureReason?: string | null;
  }>;
  /** The exports of the run's tenants (CONTRACT section 11), each with its file and its query. */
  exports: FinalExport[];
  /** The outbox of the run's tenants (CONTRACT section 12), read in the same snapshot as the rows. */
  events: Array<{
    id: string;
    tenant: string;
    type: string;
    resourceId: string;
    /** When the transaction that wrote it began (ms since the run's start, as RequestEvent.start). */
    at?: number;
  }>;
  ledger: {
    charges: Array<{ paymentNo: string; chargeId: string; status: string; amount: string }>;
    // refundNo: a business refund (CONTRACT section 9), which undoes no charge; absent: a compensation.
    refunds: Array<{
      chargeId: string;
      refundId?: string;
      refundNo?: string;
      paymentNo?: string;
      amount?: string;
      status?: string;
    }>;
  };
}

/** One row of an export's file, or of the query it must equal: what identifies it and does not change. */
export interface ExportRow {
  id: string;
  merchantOrderNo: string;
  amount: string;
}

export interface FinalExport {
  id: string;
  tenant: string;
  resource: 'orders' | 'payments';
  format: 'csv' | 'ndjson';
  status: string;
  /**
   * A SUCCEEDED export's file as GET /api/v1/exports/{id}/file served it to its creator, in file
   * order; null when not SUCCEEDED; a string when the download failed (what went wrong).
   */
  file: ExportRow[] | null | string;
  /** The files its creator downloaded while the run went on (a file never changes once SUCCEEDED). */
  earlier: ExportRow[][];
  /** The direct query the file must equal (the rows that existed at its creation), in id order. */
  query: ExportRow[];
}

export interface Limits {
  waitMs: number;
  leaseMs: number;
  gatewayTimeoutMs: number;
  recovererIntervalMs: number;
  maxInFlight: number;
  /** The slack the bound on waits is checked with (CPU scheduling, the client's own socket). */
  slackMs: number;
}
