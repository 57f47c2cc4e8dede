import { expect } from 'chai';
import { check, type InvariantName } from './checker.js';
import type { Answer, FinalState, HistoryEvent, Limits, RequestEvent } from './history.js';

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
    const final: FinalState = {
      ...EMPTY,
      payments: [{ ...payment, status: 'SUCCEEDED', chargeId: 'c1' }],
      orders: [{ id: 'o1', tenant: 't', merchantOrderNo: 'mo-1', status: 'PAID', amount: '10.00' }],
      ledger: { charges: [charge('c1')], refunds: [{ chargeId: 'c1', refundNo: 'RN1' }] },
      events: PAID_EVENTS,
    };
    expect(broken([], final)).to.deep.equal([]);
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
    // A refund's or an export's event is not the run's business.
    expect(withEvents([...PAID_EVENTS, event('refund.succeeded', 'r1')])).to.deep.equal([]);
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
});
