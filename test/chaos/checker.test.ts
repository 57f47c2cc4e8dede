import { expect } from 'chai';
import { check, type InvariantName } from './checker.js';
import type { Answer, FinalExport, FinalState, HistoryEvent, Limits, RequestEvent } from './history.js';

const LIMITS: Limits = {
  waitMs: 300,
  leaseMs: 1500,
  gatewayTimeoutMs: 500,
  recovererIntervalMs: 200,
  maxInFlight: 4,
  slackMs: 1500,
};
const EMPTY: FinalState = {
  processingRecords: [],
  payments: [],
  orders: [],
  events: [],
  refunds: [],
  exports: [],
  ledger: { charges: [], refunds: [] },
};
let seq = 0;
const body = (amount = '10.00') => JSON.stringify({ merchantOrderNo: 'mo-1', amount });
function req(answer: Answer, over: Partial<RequestEvent> = {}): RequestEvent {
  const n = seq++;
  return {
    type: 'request',
    seq: n,
    client: 0,
    tenant: 't',
    user: '1',
    op: 'payments.create',
    transport: 'rest',
    key: 'k1',
    body: body(),
    merchantOrderNo: 'mo-1',
    instance: 0,
    start: n * 10,
    end: n * 10 + 5,
    answer,
    disturbed: false,
    ...over,
  };
}
const ok = (data: unknown): Answer => ({ kind: 'ok', httpStatus: 201, data, replayed: false });
const error = (httpStatus: number, code: number, retryAfter = true): Answer => ({
  kind: 'error',
  httpStatus,
  code,
  message: 'm',
  retryAfter,
  replayed: false,
});
const broken = (history: HistoryEvent[], final: FinalState = EMPTY) =>
  check(history, final, LIMITS).violations.map((v) => v.invariant as InvariantName);
const payment = {
  id: 'p1',
  paymentNo: 'PN1',
  tenant: 't',
  merchantOrderNo: 'mo-1',
  amount: '10.00',
  resumable: false,
  amountRefunded: '0.00',
};
const charge = (chargeId: string) => ({ paymentNo: 'PN1', chargeId, status: 'SUCCEEDED', amount: '10.00' });
let eventSeq = 0;
const event = (type: string, resourceId: string, tenant = 't') => ({
  id: `evt_1_${++eventSeq}`,
  tenant,
  type,
  resourceId,
});
/** The outbox a consistent run leaves: order o1 created and paid by payment p1. */
const PAID_EVENTS = [
  event('order.created', 'o1'),
  event('payment.succeeded', 'p1'),
  event('order.paid', 'o1'),
];
const refundRow = {
  id: 'r1',
  refundNo: 'RN1',
  paymentId: 'p1',
  tenant: 't',
  status: 'SUCCEEDED',
  amount: '3.00',
};
/** A consistent run where payment p1 (10.00) was refunded 3.00 by refund r1. */
const REFUNDED: FinalState = {
  ...EMPTY,
  payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1', amountRefunded: '3.00' }],
  orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
  refunds: [refundRow],
  ledger: {
    charges: [charge('c1')],
    refunds: [{ chargeId: 'c1', refundNo: 'RN1', paymentNo: 'PN1', amount: '3.00', status: 'SUCCEEDED' }],
  },
  events: [...PAID_EVENTS, event('refund.succeeded', 'r1')],
};

// The checker must be able to fail: each invariant is shown a history that breaks it.
describe('chaos checker: each invariant catches a history that breaks it', () => {
  it('when a history is consistent, then there is no violation', () => {
    const final: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1' }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
      events: PAID_EVENTS,
      ledger: { charges: [charge('c1')], refunds: [] },
    };
    expect(
      broken(
        [
          req(error(503, 503)),
          req(ok({ id: 'p1', paymentNo: 'PN1', status: 'SUCCEEDED' })),
          req(ok({ id: 'p1', paymentNo: 'PN1', status: 'SUCCEEDED' })),
          req(error(409, 40901), { body: body('11.00') }),
        ],
        final,
      ),
    ).to.deep.equal([]);
  });
  it('when a key gets two different final answers, then key-answers-agree', () => {
    expect(broken([req(ok({ id: 'p1' })), req(ok({ id: 'p2' }))])).to.include('key-answers-agree');
  });
  it('when two bodies under one key both succeed, then mismatch-never-gets-a-result', () => {
    expect(broken([req(ok({ id: 'p1' })), req(ok({ id: 'p1' }), { body: body('11.00') })])).to.include(
      'mismatch-never-gets-a-result',
    );
  });
  it("when the key's own body gets 40901, then same-body-never-40901", () => {
    expect(broken([req(ok({ id: 'p1' })), req(error(409, 40901))])).to.include('same-body-never-40901');
  });
  it('when an answer is a 500, or a 503 lacks Retry-After, then no-5xx-but-503', () => {
    expect(broken([req(error(500, 500))])).to.include('no-5xx-but-503');
    expect(broken([req(error(503, 503, false))])).to.include('no-5xx-but-503');
  });
  it('when an undisturbed request takes longer than the bound, then waits-bounded; a disturbed one is exempt', () => {
    expect(broken([req(error(503, 503), { start: 0, end: 5000 })])).to.include('waits-bounded');
    expect(broken([req(error(503, 503), { start: 0, end: 5000, disturbed: true })])).to.deep.equal([]);
  });
  it('when an order has two standing charges, then one-charge-per-order', () => {
    const final: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1' }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
      events: PAID_EVENTS,
      ledger: { charges: [charge('c1'), charge('c2')], refunds: [] },
    };
    expect(broken([], final)).to.include('one-charge-per-order');
    expect(
      broken([], { ...final, ledger: { ...final.ledger, refunds: [{ chargeId: 'c2' }] } }),
    ).to.deep.equal([]);
  });
  it('when a SUCCEEDED payment has no standing charge, then succeeded-has-its-charge', () => {
    const final: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1' }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
      ledger: { charges: [charge('c1')], refunds: [{ chargeId: 'c1' }] },
    };
    expect(broken([], final)).to.include('succeeded-has-its-charge');
  });
  it('when a SUCCEEDED payment has a business refund (with a refundNo), then its charge still stands: no violation', () => {
    expect(broken([], REFUNDED)).to.deep.equal([]);
  });
  it('when refunds add up to more than the payment, or amount_refunded does, then refunded-within-paid', () => {
    const second = { ...refundRow, id: 'r2', refundNo: 'RN2', status: 'PROCESSING', amount: '7.50' };
    expect(broken([], { ...REFUNDED, refunds: [...REFUNDED.refunds, second] })).to.include(
      'refunded-within-paid',
    );
    const over = { ...REFUNDED.payments[0], amountRefunded: '12.00' };
    expect(broken([], { ...REFUNDED, payments: [over] })).to.include('refunded-within-paid');
  });
  it('when amount_refunded is not the sum of SUCCEEDED refunds, then amount-refunded-is-succeeded-refunds', () => {
    const short = { ...REFUNDED.payments[0], amountRefunded: '2.00' };
    expect(broken([], { ...REFUNDED, payments: [short] })).to.deep.equal([
      'amount-refunded-is-succeeded-refunds',
    ]);
    const failed = { ...refundRow, status: 'FAILED' };
    expect(
      broken([], { ...REFUNDED, refunds: [failed], events: [...PAID_EVENTS, event('refund.failed', 'r1')] }),
    ).to.include('amount-refunded-is-succeeded-refunds');
  });
  it('when the gateway refunded twice, or not at all, or for a FAILED or unrecorded refund, then ledger-refunds-recorded', () => {
    const made = REFUNDED.ledger.refunds[0];
    const ledger = (refunds: FinalState['ledger']['refunds']) => ({ ...REFUNDED.ledger, refunds });
    expect(broken([], { ...REFUNDED, ledger: ledger([made, { ...made, refundId: 'x' }]) })).to.deep.equal([
      'ledger-refunds-recorded',
    ]);
    expect(broken([], { ...REFUNDED, ledger: ledger([]) })).to.deep.equal(['ledger-refunds-recorded']);
    expect(broken([], { ...REFUNDED, ledger: ledger([{ ...made, amount: '4.00' }]) })).to.deep.equal([
      'ledger-refunds-recorded',
    ]);
    expect(broken([], { ...REFUNDED, ledger: ledger([made, { ...made, refundNo: 'RN9' }]) })).to.deep.equal([
      'ledger-refunds-recorded',
    ]);
    const failed: FinalState = {
      ...REFUNDED,
      payments: [{ ...REFUNDED.payments[0], amountRefunded: '0.00' }],
      refunds: [{ ...refundRow, status: 'FAILED' }],
      events: [...PAID_EVENTS, event('refund.failed', 'r1')],
    };
    expect(broken([], { ...failed, ledger: ledger([{ ...made, status: 'DECLINED' }]) })).to.deep.equal([]);
    expect(broken([], failed)).to.deep.equal(['ledger-refunds-recorded']);
  });
  it('when a refund is still PROCESSING at the end, then nothing-stranded', () => {
    const open: FinalState = {
      ...REFUNDED,
      payments: [{ ...REFUNDED.payments[0], amountRefunded: '0.00' }],
      refunds: [{ ...refundRow, status: 'PROCESSING' }],
      events: PAID_EVENTS,
      ledger: { ...REFUNDED.ledger, refunds: [] },
    };
    expect(broken([], open)).to.deep.equal(['nothing-stranded']);
  });
  it("when an export's file misses a row that existed, holds one twice, out of order, one of another user or a changed one, then export-file-equals-query", () => {
    const rows = [
      { id: '1', merchantOrderNo: 'mo-1', amount: '10.00' },
      { id: '2', merchantOrderNo: 'mo-2', amount: '5.00' },
    ];
    // mo-1 and mo-2 were answered 201 before the export's POST was sent; mo-3 was still in flight.
    const history = [
      req(ok({ id: '1' }), { op: 'orders.create', merchantOrderNo: 'mo-1', key: 'o1' }),
      req(ok({ id: '2' }), { op: 'orders.create', merchantOrderNo: 'mo-2', key: 'o2' }),
      req(
        { kind: 'processing', retryAfter: true, location: null, resourceId: 'e1' },
        { op: 'exports.create', key: 'e', merchantOrderNo: '' },
      ),
    ];
    const racing = { id: '3', merchantOrderNo: 'mo-3', amount: '1.00' };
    const exported = (
      file: FinalExport['file'],
      query = rows,
      earlier: FinalExport['earlier'] = [],
    ): FinalState => ({
      ...EMPTY,
      exports: [
        {
          id: 'e1',
          tenant: 't',
          resource: 'orders',
          format: 'csv',
          status: 'SUCCEEDED',
          file,
          earlier,
          query,
        },
      ],
      events: [event('export.succeeded', 'e1')],
    });
    const only = (final: FinalState) => broken(history, final).filter((v) => v !== 'one-order-per-create');
    expect(only(exported(rows))).to.deep.equal([]);
    // A row committed while the export was created may be on either side of its cut-off.
    expect(only(exported(rows, [...rows, racing]))).to.deep.equal([]);
    expect(only(exported([...rows, racing], [...rows, racing]))).to.deep.equal([]);
    expect(only(exported([rows[1]]))).to.deep.equal(['export-file-equals-query']);
    expect(only(exported([rows[0], rows[1], rows[1]]))).to.deep.equal(['export-file-equals-query']);
    expect(only(exported([rows[1], rows[0]]))).to.deep.equal(['export-file-equals-query']);
    expect(only(exported([...rows, racing]))).to.deep.equal(['export-file-equals-query']);
    expect(only(exported([rows[0], { ...rows[1], amount: '6.00' }]))).to.deep.equal([
      'export-file-equals-query',
    ]);
    expect(only(exported('404 not found'))).to.deep.equal(['export-file-equals-query']);
    expect(only(exported(rows, rows, [[rows[0]]]))).to.deep.equal(['export-file-equals-query']);
  });
  it('when an export is still PROCESSING at the end, then no-export-left-processing', () => {
    const final: FinalState = {
      ...EMPTY,
      exports: [
        {
          id: 'e1',
          tenant: 't',
          resource: 'orders',
          format: 'csv',
          status: 'PROCESSING',
          file: null,
          earlier: [],
          query: [],
        },
      ],
    };
    expect(broken([], final)).to.deep.equal(['no-export-left-processing']);
  });
  it("when an export's key is answered 202 with two different export ids, then key-answers-agree", () => {
    const accepted = (resourceId: string): Answer => ({
      kind: 'processing',
      retryAfter: true,
      location: null,
      resourceId,
    });
    const over = { op: 'exports.create' as const, key: 'e', merchantOrderNo: '' };
    expect(broken([req(accepted('e1'), over), req(accepted('e1'), over)])).to.deep.equal([]);
    expect(broken([req(accepted('e1'), over), req(accepted('e2'), over)])).to.include('key-answers-agree');
  });
  it('when a payment is still PROCESSING or a record PROCESSING at the end, then nothing-stranded / no-processing-after-heal', () => {
    const final: FinalState = {
      ...EMPTY,
      processingRecords: [{ scopeKey: 's', ageMs: 9000 }],
      payments: [{ ...payment, status: 'PROCESSING', chargeId: null, resumable: true }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'CREATED', amount: '10.00' }],
    };
    expect(broken([], final)).to.include.members(['nothing-stranded', 'no-processing-after-heal']);
  });
  it('when a sample shows more PROCESSING records of a user than the cap, then caps-hold', () => {
    expect(broken([{ type: 'sample', at: 0, maxProcessingPerUser: 5, user: 't:1' }])).to.include('caps-hold');
  });
  it('when an order answered 201 is missing, then one-order-per-create', () => {
    expect(broken([req(ok({ id: '1' }), { op: 'orders.create' })])).to.include('one-order-per-create');
  });
  it('when a payment answered SUCCEEDED is missing or not SUCCEEDED afterwards, then acknowledged-payment-kept', () => {
    const paidAnswer = ok({ paymentNo: payment.paymentNo, status: 'SUCCEEDED' });
    const kept: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1' }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
      events: PAID_EVENTS,
      ledger: { charges: [charge('c1')], refunds: [] },
    };
    expect(broken([req(paidAnswer)], kept)).to.deep.equal([]);
    expect(broken([req(paidAnswer)], EMPTY)).to.include('acknowledged-payment-kept');
    const lostStatus: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'PROCESSING', chargeId: null, resumable: true }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'CREATED', amount: '10.00' }],
    };
    expect(broken([req(paidAnswer)], lostStatus)).to.include('acknowledged-payment-kept');
  });
  it('when an event is missing or written twice, or written for a PROCESSING payment, an unpaid order or a resource that does not exist, then one-event-per-change', () => {
    const paid: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1' }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
      events: PAID_EVENTS,
      ledger: { charges: [charge('c1')], refunds: [] },
    };
    const withEvents = (events: FinalState['events']) => broken([], { ...paid, events });
    expect(withEvents(PAID_EVENTS)).to.deep.equal([]);
    // A refund's or an export's event names one that exists, with its status; another resource's is not the run's.
    expect(withEvents([...PAID_EVENTS, event('refund.succeeded', 'r1')])).to.deep.equal([
      'one-event-per-change',
    ]);
    expect(withEvents([...PAID_EVENTS, event('export.succeeded', 'e1')])).to.deep.equal([
      'one-event-per-change',
    ]);
    expect(withEvents([...PAID_EVENTS, event('webhook_endpoint.created', 'w1')])).to.deep.equal([]);
    expect(broken([], { ...REFUNDED, events: PAID_EVENTS })).to.deep.equal(['one-event-per-change']);
    expect(
      broken([], { ...REFUNDED, events: [...REFUNDED.events, event('refund.succeeded', 'r1')] }),
    ).to.deep.equal(['one-event-per-change']);
    const exportRow = {
      id: 'e1',
      tenant: 't',
      resource: 'orders' as const,
      format: 'csv' as const,
      file: null,
      earlier: [],
      query: [],
    };
    expect(broken([], { ...paid, exports: [{ ...exportRow, status: 'FAILED' }] })).to.deep.equal([
      'one-event-per-change',
    ]);
    expect(
      broken([], {
        ...paid,
        exports: [{ ...exportRow, status: 'FAILED' }],
        events: [...PAID_EVENTS, event('export.failed', 'e1')],
      }),
    ).to.deep.equal([]);
    const [created, succeeded, orderPaid] = PAID_EVENTS;
    // A duplicate: the same change's event twice (two ids).
    expect(withEvents([...PAID_EVENTS, { ...succeeded, id: 'evt_2_9' }])).to.deep.equal([
      'one-event-per-change',
    ]);
    expect(withEvents([created, succeeded, orderPaid, { ...created, id: 'evt_2_9' }])).to.deep.equal([
      'one-event-per-change',
    ]);
    // A committed change without its event.
    expect(withEvents([created, succeeded])).to.deep.equal(['one-event-per-change']);
    expect(withEvents([created, orderPaid])).to.deep.equal(['one-event-per-change']);
    // An event of another status than the row's, of an order or payment that is not there (another id, another tenant).
    expect(withEvents([created, { ...succeeded, type: 'payment.failed' }, orderPaid])).to.deep.equal([
      'one-event-per-change',
    ]);
    expect(withEvents([...PAID_EVENTS, event('order.created', 'o2')])).to.deep.equal([
      'one-event-per-change',
    ]);
    expect(withEvents([...PAID_EVENTS, event('payment.failed', 'p1', 'other')])).to.deep.equal([
      'one-event-per-change',
    ]);
    // An unpaid order with order.paid; a PROCESSING payment with an event.
    const open: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'PROCESSING', chargeId: null }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'CREATED', amount: '10.00' }],
      events: [created],
    };
    expect(broken([], open)).to.deep.equal(['nothing-stranded']);
    expect(broken([], { ...open, events: [created, orderPaid] })).to.include('one-event-per-change');
    expect(broken([], { ...open, events: [created, event('payment.failed', 'p1')] })).to.include(
      'one-event-per-change',
    );
  });

  it("when a payment or refund reaches its outcome after its requests were all answered 503 (nothing done, 'Database unavailable' too), then no-outcome-after-503; a request in flight then, or an earlier 202 or no answer, is a cause", () => {
    const unavailable = (message: string): Answer => ({
      kind: 'error',
      httpStatus: 503,
      code: 503,
      message,
      retryAfter: true,
      replayed: false,
    });
    const paidAt = (at: number): FinalState => ({
      ...EMPTY,
      payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1' }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
      events: PAID_EVENTS.map((e) => (e.type === 'payment.succeeded' ? { ...e, at } : e)),
      ledger: { charges: [charge('c1')], refunds: [] },
    });
    // Told "Database busy" (a definite rollback) at 0..5 ms, then charged by the recoverer at 2 s:
    // the defect of 2026-11-29 (Tx 2 after a charge answered 503).
    const busy = req(unavailable('Database busy; retry with the same Idempotency-Key'), { start: 0, end: 5 });
    expect(broken([busy], paidAt(2000))).to.deep.equal(['no-outcome-after-503']);
    for (const message of [
      'payment gateway unavailable; retry',
      // A lost connection: a COMMIT that may have committed is looked at again before any 503.
      'Database unavailable; retry with the same Idempotency-Key',
    ])
      expect(broken([req(unavailable(message), { start: 0, end: 5 })], paidAt(2000)), message).to.deep.equal([
        'no-outcome-after-503',
      ]);
    // Settled while a request for its order was in flight (any key): its cause.
    expect(
      broken(
        [
          busy,
          req(ok({ id: 'p1', paymentNo: 'PN1', status: 'SUCCEEDED' }), { key: 'k2', start: 1990, end: 2010 }),
        ],
        paidAt(2000),
      ),
    ).to.deep.equal([]);
    // After an answer that left it open: 202, or no answer.
    for (const open of [
      { kind: 'processing', retryAfter: true, location: '/api/v1/payments/p1', resourceId: 'p1' } as Answer,
      { kind: 'lost', reason: 'timeout' } as Answer,
    ])
      expect(broken([req(open, { start: 0, end: 5 })], paidAt(2000)), JSON.stringify(open)).to.deep.equal([]);
    // An event without its time (an older history) is not judged.
    expect(broken([busy], { ...paidAt(2000), events: PAID_EVENTS })).to.deep.equal([]);
    // A refund alike: its only request told 503 at 0..5 ms, refunded at 3 s.
    const refundAsked = req(unavailable('Database busy'), {
      op: 'refunds.create',
      key: 'rk',
      body: JSON.stringify({ id: 'p1', amount: '3.00' }),
      start: 0,
      end: 5,
    });
    const refundedAt = (at: number): FinalState => ({
      ...REFUNDED,
      events: REFUNDED.events.map((e) => (e.type === 'refund.succeeded' ? { ...e, at } : e)),
    });
    expect(broken([refundAsked], refundedAt(3000))).to.deep.equal(['no-outcome-after-503']);
    expect(broken([refundAsked], refundedAt(3))).to.deep.equal([]);
    // Closed FAILED by the recoverer at 3 s because its key expired: nothing performed, not judged;
    // FAILED for any other reason at 3 s is an outcome no request caused.
    const closedAt = (at: number, failureReason: string): FinalState => ({
      ...REFUNDED,
      payments: [{ ...REFUNDED.payments[0], amountRefunded: '0.00' }],
      refunds: [{ ...refundRow, status: 'FAILED', failureReason }],
      ledger: { ...REFUNDED.ledger, refunds: [] },
      events: [...PAID_EVENTS, { ...event('refund.failed', 'r1'), at }],
    });
    expect(broken([refundAsked], closedAt(3000, 'KEY_EXPIRED'))).to.deep.equal([]);
    expect(broken([refundAsked], closedAt(3000, 'DECLINED'))).to.deep.equal(['no-outcome-after-503']);
  });
});
