import type { Answer, ExportRow, FinalState, HistoryEvent, Limits, RequestEvent } from './history.js';

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
  'nothing-stranded':
    'once clients came back, every payment and every refund is final (resumable ones resumed)',
  'caps-hold': 'committed PROCESSING records of one user never exceed IDEMPOTENCY_MAX_IN_FLIGHT',
  'waits-bounded':
    'an undisturbed request answers within IDEMPOTENCY_WAIT_MS + 2 gateway time-outs (its own charge and query) + slack',
  'one-order-per-create':
    'each merchantOrderNo that was answered 201 exists exactly once, with the amount sent',
  'acknowledged-payment-kept':
    'each payment answered with a success exists afterwards, with the status that answer gave (SUCCEEDED stays SUCCEEDED)',
  'refunded-within-paid':
    "a payment's SUCCEEDED and PROCESSING refunds never add up to more than its amount, nor does its amount_refunded",
  'amount-refunded-is-succeeded-refunds':
    "a payment's amount_refunded equals the sum of its SUCCEEDED refunds",
  'ledger-refunds-recorded':
    'the gateway made one refund per refundNo at most, a SUCCEEDED one (of the same amount) for each SUCCEEDED refund and none for a FAILED, PROCESSING or unrecorded one',
  'export-file-equals-query':
    "every SUCCEEDED export's file holds its query's rows (those that existed at its creation), row for row, in id order, none twice",
  'no-export-left-processing': 'once faults stopped and clients finished, no export is PROCESSING',
  'one-event-per-change':
    'every committed change has exactly one event: each order one order.created, each PAID order one order.paid (others none), each SUCCEEDED/FAILED payment, refund and export one <resource>.<status> (PROCESSING none), no event of a resource that does not exist',
  'no-outcome-after-503':
    "a payment or refund reaches its outcome (the transaction of its final event) only while a request for it is in flight, or after one whose answer left it open (202 or no answer); never after 503s alone, which tell a client nothing was done, 'Database unavailable' included (a refund closed FAILED 'KEY_EXPIRED' by the recoverer performs nothing and is not judged)",
} as const;

export type InvariantName = keyof typeof INVARIANTS;

const isFinal = (a: Answer) =>
  a.kind === 'ok' || (a.kind === 'error' && a.httpStatus !== 503 && a.httpStatus !== 429 && a.code !== 40901);

/** An export's 202 is its key's stored answer (CONTRACT section 11): final, and replayed as it was. */
const isFinalOf = (r: RequestEvent) =>
  isFinal(r.answer) || (r.op === 'exports.create' && r.answer.kind === 'processing');
const succeeded = (r: RequestEvent) =>
  r.answer.kind === 'ok' || (isFinalOf(r) && r.answer.kind === 'processing');

/** An answer as it must be repeated: the success body, or the error's status, code and message. */
const canonical = (a: Answer) =>
  a.kind === 'ok'
    ? JSON.stringify({ ok: a.data })
    : a.kind === 'error'
      ? JSON.stringify({ status: a.httpStatus, code: a.code, message: a.message })
      : a.kind === 'processing' && a.resourceId
        ? JSON.stringify({ processing: a.resourceId })
        : a.kind;

/** An amount in cents ("12.50" → 1250). */
const cents = (amount: string | undefined) => Math.round(Number(amount ?? 'NaN') * 100);

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
    const finals = sorted.filter(isFinalOf).sort((a, b) => a.end - b.end);
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
    const succeededBodies = new Set(sorted.filter(succeeded).map((r) => r.body));
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
  for (const r of final.refunds) {
    checked['nothing-stranded'] += 1;
    if (r.status === 'PROCESSING')
      fail(
        'nothing-stranded',
        `refund ${r.refundNo} (${r.tenant}, payment ${r.paymentId}) still PROCESSING`,
        refundSlice(requests, r.paymentId),
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

  // --- refunds: the cap, amount_refunded and the gateway's ledger (CONTRACT sections 9 and 10) ----------
  const refundsOf = new Map<string, FinalState['refunds']>();
  for (const r of final.refunds) refundsOf.set(r.paymentId, [...(refundsOf.get(r.paymentId) ?? []), r]);
  for (const p of final.payments) {
    const mine = refundsOf.get(p.id) ?? [];
    const sum = (statuses: string[]) =>
      mine.filter((r) => statuses.includes(r.status)).reduce((n, r) => n + cents(r.amount), 0);
    const open = sum(['SUCCEEDED', 'PROCESSING']);
    checked['refunded-within-paid'] += 1;
    if (open > cents(p.amount) || cents(p.amountRefunded) > cents(p.amount))
      fail(
        'refunded-within-paid',
        `payment ${p.paymentNo} of ${p.amount}: SUCCEEDED + PROCESSING refunds ${open / 100}, amount_refunded ${p.amountRefunded}`,
        refundSlice(requests, p.id),
      );
    checked['amount-refunded-is-succeeded-refunds'] += 1;
    if (cents(p.amountRefunded) !== sum(['SUCCEEDED']))
      fail(
        'amount-refunded-is-succeeded-refunds',
        `payment ${p.paymentNo}: amount_refunded ${p.amountRefunded}, SUCCEEDED refunds ${sum(['SUCCEEDED']) / 100}`,
        refundSlice(requests, p.id),
      );
  }
  const madeOf = new Map<string, FinalState['ledger']['refunds']>();
  for (const l of final.ledger.refunds)
    if (l.refundNo) madeOf.set(l.refundNo, [...(madeOf.get(l.refundNo) ?? []), l]);
  for (const r of final.refunds) {
    checked['ledger-refunds-recorded'] += 1;
    const made = madeOf.get(r.refundNo) ?? [];
    madeOf.delete(r.refundNo);
    const done = made.filter((l) => l.status === 'SUCCEEDED');
    const what = `refund ${r.refundNo} (${r.status}, ${r.amount})`;
    if (made.length > 1)
      fail(
        'ledger-refunds-recorded',
        `${what} was made ${made.length} times at the gateway`,
        refundSlice(requests, r.paymentId),
      );
    else if (r.status === 'SUCCEEDED' && (done.length !== 1 || cents(done[0].amount) !== cents(r.amount)))
      fail(
        'ledger-refunds-recorded',
        `${what}: the gateway's SUCCEEDED refunds of it are ${JSON.stringify(done.map((l) => l.amount))}`,
        refundSlice(requests, r.paymentId),
      );
    else if (r.status !== 'SUCCEEDED' && done.length > 0)
      fail(
        'ledger-refunds-recorded',
        `${what} was refunded by the gateway`,
        refundSlice(requests, r.paymentId),
      );
  }
  for (const [refundNo, made] of madeOf) {
    checked['ledger-refunds-recorded'] += 1;
    fail(
      'ledger-refunds-recorded',
      `the gateway made ${made.length} refund(s) under ${refundNo} (payment ${made[0].paymentNo}), which has no refund row`,
      [],
    );
  }

  // --- exports: each file equals its query (CONTRACT section 11) ---------------------------------
  for (const e of final.exports) {
    checked['no-export-left-processing'] += 1;
    if (e.status === 'PROCESSING')
      fail(
        'no-export-left-processing',
        `export ${e.id} (${e.tenant}) still PROCESSING`,
        exportSlice(requests, e.id),
      );
    if (e.status !== 'SUCCEEDED') continue;
    checked['export-file-equals-query'] += 1;
    const certain = certainBefore(requests, e.tenant, e.resource, exportSlice(requests, e.id));
    for (const [i, file] of [e.file, ...e.earlier].entries()) {
      if (i > 0) checked['export-file-equals-query'] += 1;
      const problem = fileProblem(file, e.query, certain);
      if (problem)
        fail(
          'export-file-equals-query',
          `export ${e.id} (${e.tenant} ${e.resource} ${e.format}${i > 0 ? `, downloaded during the run` : ''}): ${problem}`,
          exportSlice(requests, e.id),
        );
    }
  }

  // --- the outbox: one event per committed change (CONTRACT section 12) ---------------------------
  // Events of other resources (webhook endpoints...) are not the run's.
  const eventsOf = new Map<string, string[]>();
  for (const e of final.events) {
    const resource = e.type.slice(0, e.type.indexOf('.'));
    if (!['order', 'payment', 'refund', 'export'].includes(resource)) continue;
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
  const finalEvent = (status: string, resource: string) =>
    status === 'SUCCEEDED' || status === 'FAILED' ? [`${resource}.${status.toLowerCase()}`] : [];
  for (const r of final.refunds) {
    const p = final.payments.find((x) => x.id === r.paymentId);
    expectOnce(
      `${r.tenant}/refund/${r.id}`,
      finalEvent(r.status, 'refund'),
      `refund ${r.refundNo} (${r.status})`,
      p ? `${p.tenant}/${p.merchantOrderNo}` : '',
    );
  }
  for (const e of final.exports)
    expectOnce(
      `${e.tenant}/export/${e.id}`,
      finalEvent(e.status, 'export'),
      `export ${e.id} (${e.status})`,
      '',
    );
  // --- a 503 told the client nothing was done: nothing is done after it unless a request asks -----
  // (CONTRACT section 3: the recoverer never charges a resumable payment on its own). The outcome's
  // time is its final event's (written by Tx 2); a request could have caused it when it was in
  // flight then, or had an answer before it that left the outcome open.
  const OUTCOME_SLACK_MS = 50;
  // A 503 leaves nothing open, not even "Database unavailable": a request whose COMMIT may have
  // committed looks again, and answers 202 when it cannot (idempotency/effect-run.ts).
  const leftOpen = (a: Answer) => a.kind === 'processing' || a.kind === 'lost';
  const outcomeCaused = (at: number, requests: HistoryEvent[]) =>
    requests.some(
      (r) =>
        r.type === 'request' &&
        r.start <= at + OUTCOME_SLACK_MS &&
        (r.end >= at - OUTCOME_SLACK_MS || leftOpen(r.answer)),
    );
  for (const e of final.events) {
    if (e.at === undefined || !/^(payment|refund)\.(succeeded|failed)$/.test(e.type)) continue;
    const p = e.type.startsWith('payment.')
      ? final.payments.find((x) => x.id === e.resourceId && x.tenant === e.tenant)
      : undefined;
    const r = p ? undefined : final.refunds.find((x) => x.id === e.resourceId && x.tenant === e.tenant);
    const asked = p
      ? slice(requests, `${p.tenant}/${p.merchantOrderNo}`).filter(
          (q) => q.type === 'request' && q.op === 'payments.create',
        )
      : r
        ? refundSlice(requests, r.paymentId)
        : [];
    if (!p && !r) continue; // no such resource: one-event-per-change says so
    // The recoverer closes a resumable refund whose key expired (after asking the gateway, which has
    // none): a closure that performs nothing, so no request need have caused it. The ledger's
    // invariant checks that no refund was made for it.
    if (r?.status === 'FAILED' && r.failureReason === 'KEY_EXPIRED') continue;
    checked['no-outcome-after-503'] += 1;
    if (!outcomeCaused(e.at, asked))
      fail(
        'no-outcome-after-503',
        `${e.type} of ${e.resourceId} at ${Math.round(e.at)} ms, when no request for it was in flight and every earlier answer said nothing was done`,
        asked,
      );
  }
  // What is left names no order, payment, refund or export there is.
  for (const [key, types] of eventsOf) {
    checked['one-event-per-change'] += 1;
    fail('one-event-per-change', `events [${types.join(', ')}] of ${key}, which does not exist`, []);
  }
  return { violations, checked };
}

/** The refund requests of one payment, in order. */
function refundSlice(requests: RequestEvent[], paymentId: string): HistoryEvent[] {
  return requests
    .filter((r) => r.op === 'refunds.create' && (JSON.parse(r.body) as { id?: string }).id === paymentId)
    .sort((a, b) => a.start - b.start);
}

/** The requests under the key that created an export, in order. */
function exportSlice(requests: RequestEvent[], exportId: string): RequestEvent[] {
  const creating = requests.find(
    (r) => r.op === 'exports.create' && r.answer.kind === 'processing' && r.answer.resourceId === exportId,
  );
  if (!creating) return [];
  return requests
    .filter(
      (r) =>
        r.op === 'exports.create' &&
        r.key === creating.key &&
        r.tenant === creating.tenant &&
        r.user === creating.user,
    )
    .sort((a, b) => a.start - b.start);
}

/**
 * The orders (merchantOrderNo) whose row certainly existed when the export was created: the request
 * that made it had its success back before the export's first request was sent. A row committed
 * while the export was being created may fall on either side of its cut-off (docs/DECISIONS.md, the
 * snapshot rule): its absence from the file is not a violation, its presence outside the query is.
 */
function certainBefore(
  requests: RequestEvent[],
  tenant: string,
  resource: 'orders' | 'payments',
  exportRequests: RequestEvent[],
): Set<string> {
  const sentAt = exportRequests[0]?.start ?? Number.NEGATIVE_INFINITY;
  const op = resource === 'orders' ? 'orders.create' : 'payments.create';
  return new Set(
    requests
      .filter(
        (r) =>
          r.op === op &&
          r.tenant === tenant &&
          r.end < sentAt &&
          (r.answer.kind === 'ok' || (op === 'payments.create' && r.answer.kind === 'processing')),
      )
      .map((r) => r.merchantOrderNo),
  );
}

/** What is wrong with an export's file against its query, or undefined when it equals it. */
export function fileProblem(
  file: ExportRow[] | null | string,
  query: ExportRow[],
  certain: Set<string>,
): string | undefined {
  if (file === null || typeof file === 'string') return `the file could not be read: ${file}`;
  const seen = new Set<string>();
  for (const row of file) {
    if (seen.has(row.id)) return `row ${row.id} (${row.merchantOrderNo}) is in the file twice`;
    seen.add(row.id);
  }
  const wanted = new Map(query.map((q, i) => [q.id, { q, i }]));
  let last = -1;
  for (const row of file) {
    const w = wanted.get(row.id);
    if (!w) return `row ${row.id} (${row.merchantOrderNo}) is in the file but not in its query`;
    if (w.q.merchantOrderNo !== row.merchantOrderNo || cents(w.q.amount) !== cents(row.amount))
      return `row ${row.id} is ${JSON.stringify(row)} in the file, ${JSON.stringify(w.q)} in the table`;
    if (w.i < last) return `row ${row.id} is out of id order`;
    last = w.i;
  }
  const missing = query.filter((q) => !seen.has(q.id) && certain.has(q.merchantOrderNo));
  if (missing.length > 0)
    return `${missing.length} row(s) of its query are not in the file: ${missing
      .slice(0, 5)
      .map((q) => `${q.id} (${q.merchantOrderNo})`)
      .join(', ')}`;
  return undefined;
}

/** The requests about one order (tenant/merchantOrderNo), in order: what a reader needs to see. */
function slice(requests: RequestEvent[], order: string): HistoryEvent[] {
  return requests
    .filter((r) => `${r.tenant}/${r.merchantOrderNo}` === order)
    .sort((a, b) => a.start - b.start);
}
