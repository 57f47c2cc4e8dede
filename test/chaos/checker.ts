import type { Answer, FinalState, HistoryEvent, Limits, RequestEvent } from './history.js';

/**
 * The model of the protocol (CONTRACT sections 3 and 5) as invariants over a recorded history and
 * the final state. Each one names what may be answered given what was answered before, or what the
 * ledger and the tables may hold. A violation names the invariant, says what broke it and carries
 * the slice of the history that shows it.
 */
export interface Violation {
  invariant: string;
  message: string;
  slice: HistoryEvent[];
}

export interface CheckResult {
  /** Every violation found, in the order the invariants are listed below. */
  violations: Violation[];
  /** How many times each invariant was evaluated (one per key, payment, answer... it covers). */
  checked: Record<string, number>;
}

export const INVARIANTS = {
  'one-charge-per-order': 'each order is charged at most once (refunded charges do not count)',
  'succeeded-has-its-charge':
    'a SUCCEEDED payment has exactly one standing charge, the one it records, and its order is PAID; FAILED has none standing; an order is PAID only with a SUCCEEDED payment',
  'key-answers-agree': 'every final answer for a key equals the first final answer for it',
  'mismatch-never-gets-a-result':
    'under one key, only one body ever gets a success; the others get 409 40901 or no final answer',
  'same-body-never-40901': 'a request with the same body as the first under its key never gets 40901',
  'no-5xx-but-503': 'no answer is a 5xx other than 503, and every 503, 429 and 202 has Retry-After',
  'no-processing-after-heal':
    'no record stays PROCESSING once faults stopped and lease + recoverer interval passed',
  'nothing-stranded': 'once clients came back, every payment is final (resumable ones resumed)',
  'caps-hold': 'committed PROCESSING records of one user never exceed IDEMPOTENCY_MAX_IN_FLIGHT',
  'waits-bounded':
    'an undisturbed request answers within IDEMPOTENCY_WAIT_MS + 2 gateway time-outs (its own charge and query) + slack',
  'one-order-per-create':
    'each merchantOrderNo that was answered 201 exists exactly once, with the amount sent',
  'acknowledged-payment-kept':
    'each payment answered with a success exists afterwards, with the status that answer gave (SUCCEEDED stays SUCCEEDED)',
  'one-event-per-change':
    'every committed change has exactly one event: each order one order.created, each PAID order one order.paid (others none), each SUCCEEDED/FAILED payment one payment.<status> (PROCESSING none), no event of a resource that does not exist',
} as const;

export type InvariantName = keyof typeof INVARIANTS;

const isFinal = (a: Answer) =>
  a.kind === 'ok' || (a.kind === 'error' && a.httpStatus !== 503 && a.httpStatus !== 429 && a.code !== 40901);

/** An answer as it must be repeated: the success body, or the error's status, code and message. */
const canonical = (a: Answer) =>
  a.kind === 'ok'
    ? JSON.stringify({ ok: a.data })
    : a.kind === 'error'
      ? JSON.stringify({ status: a.httpStatus, code: a.code, message: a.message })
      : a.kind;

export function check(history: HistoryEvent[], final: FinalState, limits: Limits): CheckResult {
  const violations: Violation[] = [];
  const checked: Record<string, number> = Object.fromEntries(Object.keys(INVARIANTS).map((k) => [k, 0]));
  const fail = (invariant: InvariantName, message: string, slice: HistoryEvent[]) =>
    violations.push({ invariant, message: `${invariant}: ${message}`, slice: slice.slice(0, 20) });
  const requests = history.filter((e): e is RequestEvent => e.type === 'request');

  // --- money: the ledger and the payment rows -------------------------------------------------
  // Only a compensation (a refund without refundNo) undoes a charge; a business refund returns part or
  // all of a charge that still stands.
  const refunded = new Set(final.ledger.refunds.filter((r) => !r.refundNo).map((r) => r.chargeId));
  const standing = final.ledger.charges.filter((c) => c.status === 'SUCCEEDED' && !refunded.has(c.chargeId));
  const paymentsByNo = new Map(final.payments.map((p) => [p.paymentNo, p]));
  const standingByOrder = new Map<string, string[]>();
  for (const c of standing) {
    const p = paymentsByNo.get(c.paymentNo);
    const order = p ? `${p.tenant}/${p.merchantOrderNo}` : `unknown paymentNo ${c.paymentNo}`;
    standingByOrder.set(order, [...(standingByOrder.get(order) ?? []), c.chargeId]);
  }
  for (const [order, charges] of standingByOrder) {
    checked['one-charge-per-order'] += 1;
    if (charges.length > 1)
      fail('one-charge-per-order', `${order} has ${charges.length} standing charges`, slice(requests, order));
  }
  const orders = new Map(final.orders.map((o) => [`${o.tenant}/${o.merchantOrderNo}`, o]));
  for (const p of final.payments) {
    checked['succeeded-has-its-charge'] += 1;
    const order = `${p.tenant}/${p.merchantOrderNo}`;
    const mine = standing.filter((c) => c.paymentNo === p.paymentNo);
    const orderStatus = orders.get(order)?.status;
    if (
      p.status === 'SUCCEEDED' &&
      (mine.length !== 1 || mine[0].chargeId !== p.chargeId || orderStatus !== 'PAID')
    )
      fail(
        'succeeded-has-its-charge',
        `SUCCEEDED ${p.paymentNo} (${order}): standing ${mine.map((c) => c.chargeId)}, records ${p.chargeId}, order ${orderStatus}`,
        slice(requests, order),
      );
    if (p.status !== 'SUCCEEDED' && mine.length > 0)
      fail(
        'succeeded-has-its-charge',
        `${p.status} ${p.paymentNo} (${order}) has standing charges ${mine.map((c) => c.chargeId)}`,
        slice(requests, order),
      );
    if (p.status !== 'SUCCEEDED' && orderStatus === 'PAID')
      fail(
        'succeeded-has-its-charge',
        `${order} is PAID but its payment is ${p.status}`,
        slice(requests, order),
      );
  }

  // --- answers per key ---------------------------------------------------------------------------
  const byKey = new Map<string, RequestEvent[]>();
  for (const r of requests) {
    const scope = `${r.tenant}:${r.user}:${r.op}:${r.key}`;
    byKey.set(scope, [...(byKey.get(scope) ?? []), r]);
  }
  for (const [scope, list] of byKey) {
    const sorted = [...list].sort((a, b) => a.start - b.start);
    const finals = sorted.filter((r) => isFinal(r.answer)).sort((a, b) => a.end - b.end);
    checked['key-answers-agree'] += 1;
    const first = finals[0];
    for (const r of finals.slice(1))
      if (r.body === first.body && canonical(r.answer) !== canonical(first.answer))
        fail(
          'key-answers-agree',
          `${scope}: #${r.seq} answered ${canonical(r.answer)} after #${first.seq} answered ${canonical(first.answer)}`,
          [first, r],
        );
    checked['mismatch-never-gets-a-result'] += 1;
    const succeededBodies = new Set(sorted.filter((r) => r.answer.kind === 'ok').map((r) => r.body));
    if (succeededBodies.size > 1)
      fail(
        'mismatch-never-gets-a-result',
        `${scope}: ${succeededBodies.size} different bodies got a success`,
        sorted,
      );
    // The body of the first request that got any answer from the server is "the" body of the key.
    const firstBody = sorted.find((r) => r.answer.kind !== 'lost')?.body;
    for (const r of sorted) {
      checked['same-body-never-40901'] += 1;
      if (
        r.answer.kind === 'error' &&
        r.answer.code === 40901 &&
        r.body === firstBody &&
        succeededBodies.size <= 1
      ) {
        // Only a violation when no other body could have been first (an earlier lost request may have executed).
        const earlierOther = sorted.some((o) => o.start < r.start && o.body !== r.body);
        if (!earlierOther)
          fail('same-body-never-40901', `${scope}: #${r.seq} got 40901 with the key's own body`, sorted);
      }
    }
  }

  // --- every answer ------------------------------------------------------------------------------
  const waitBound = limits.waitMs + 2 * limits.gatewayTimeoutMs + limits.slackMs;
  for (const r of requests) {
    checked['no-5xx-but-503'] += 1;
    const a = r.answer;
    if (a.kind === 'error' && a.httpStatus >= 500 && a.httpStatus !== 503)
      fail('no-5xx-but-503', `#${r.seq} answered ${a.httpStatus} ${a.message}`, [r]);
    if (a.kind === 'error' && (a.httpStatus === 503 || a.httpStatus === 429) && !a.retryAfter)
      fail('no-5xx-but-503', `#${r.seq} answered ${a.httpStatus} without Retry-After`, [r]);
    if (a.kind === 'processing' && !a.retryAfter)
      fail('no-5xx-but-503', `#${r.seq} answered 202 without Retry-After`, [r]);
    if (!r.disturbed && a.kind !== 'lost') {
      checked['waits-bounded'] += 1;
      if (r.end - r.start > waitBound)
        fail(
          'waits-bounded',
          `#${r.seq} (${r.op} on instance ${r.instance}) took ${r.end - r.start} ms > ${waitBound} ms`,
          [r],
        );
    }
  }

  // --- the state once everything healed ------------------------------------------------------------
  for (const rec of final.processingRecords) {
    checked['no-processing-after-heal'] += 1;
    fail('no-processing-after-heal', `${rec.scopeKey} still PROCESSING (${rec.ageMs} ms old)`, []);
  }
  checked['no-processing-after-heal'] += 1;
  for (const p of final.payments) {
    checked['nothing-stranded'] += 1;
    if (p.status === 'PROCESSING')
      fail(
        'nothing-stranded',
        `${p.paymentNo} (${p.tenant}/${p.merchantOrderNo}) still PROCESSING${p.resumable ? ' (resumable)' : ''}`,
        slice(requests, `${p.tenant}/${p.merchantOrderNo}`),
      );
  }
  for (const s of history) {
    if (s.type !== 'sample') continue;
    checked['caps-hold'] += 1;
    if (s.maxProcessingPerUser > limits.maxInFlight)
      fail(
        'caps-hold',
        `${s.user} had ${s.maxProcessingPerUser} PROCESSING records (cap ${limits.maxInFlight})`,
        [s],
      );
  }
  const created = requests.filter((r) => r.op === 'orders.create' && r.answer.kind === 'ok');
  for (const r of created) {
    checked['one-order-per-create'] += 1;
    const o = orders.get(`${r.tenant}/${r.merchantOrderNo}`);
    const sent = JSON.parse(r.body) as { amount: string };
    if (!o || Number(o.amount) !== Number(sent.amount))
      fail(
        'one-order-per-create',
        `${r.tenant}/${r.merchantOrderNo} answered 201 but the row is ${JSON.stringify(o)}`,
        [r],
      );
  }
  const paid = requests.filter((r) => r.op === 'payments.create' && r.answer.kind === 'ok');
  for (const r of paid) {
    checked['acknowledged-payment-kept'] += 1;
    const said = (r.answer.kind === 'ok' ? r.answer.data : undefined) as
      | { paymentNo?: string; status?: string }
      | undefined;
    const kept = said?.paymentNo ? paymentsByNo.get(said.paymentNo) : undefined;
    if (!kept || kept.status !== said?.status)
      fail(
        'acknowledged-payment-kept',
        `#${r.seq} answered ${said?.paymentNo} ${said?.status} but the row is ${JSON.stringify(kept ?? null)}`,
        [r],
      );
  }

  // --- the outbox: one event per committed change (CONTRACT section 12) ---------------------------
  // Events of other resources (refunds, exports) are not the run's: only orders and payments are.
  const eventsOf = new Map<string, string[]>();
  for (const e of final.events) {
    const resource = e.type.slice(0, e.type.indexOf('.'));
    if (resource !== 'order' && resource !== 'payment') continue;
    const key = `${e.tenant}/${resource}/${e.resourceId}`;
    eventsOf.set(key, [...(eventsOf.get(key) ?? []), e.type]);
  }
  const expectOnce = (key: string, expected: string[], what: string, order: string) => {
    checked['one-event-per-change'] += 1;
    const got = [...(eventsOf.get(key) ?? [])].sort();
    eventsOf.delete(key);
    const want = [...expected].sort();
    if (JSON.stringify(got) !== JSON.stringify(want))
      fail(
        'one-event-per-change',
        `${what} has events [${got.join(', ')}], expected [${want.join(', ')}]`,
        slice(requests, order),
      );
  };
  for (const o of final.orders) {
    const order = `${o.tenant}/${o.merchantOrderNo}`;
    const want = o.status === 'PAID' ? ['order.created', 'order.paid'] : ['order.created'];
    expectOnce(`${o.tenant}/order/${o.id}`, want, `order ${o.id} (${order}, ${o.status})`, order);
  }
  for (const p of final.payments) {
    const order = `${p.tenant}/${p.merchantOrderNo}`;
    const want =
      p.status === 'SUCCEEDED' || p.status === 'FAILED' ? [`payment.${p.status.toLowerCase()}`] : [];
    expectOnce(`${p.tenant}/payment/${p.id}`, want, `payment ${p.paymentNo} (${order}, ${p.status})`, order);
  }
  // What is left names no order or payment there is.
  for (const [key, types] of eventsOf) {
    checked['one-event-per-change'] += 1;
    fail('one-event-per-change', `events [${types.join(', ')}] of ${key}, which does not exist`, []);
  }
  return { violations, checked };
}

/** The requests about one order (tenant/merchantOrderNo), in order: what a reader needs to see. */
function slice(requests: RequestEvent[], order: string): HistoryEvent[] {
  return requests
    .filter((r) => `${r.tenant}/${r.merchantOrderNo}` === order)
    .sort((a, b) => a.start - b.start);
}
