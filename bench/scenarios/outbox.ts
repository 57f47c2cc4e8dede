import type { BenchRun } from '../bench-run.js';
import { armsRatio, count, interleaved, loadRow, ordersToPay, type Spec } from '../measure.js';

/** The outbox's triggers on the tables these scenarios write (CONTRACT section 12; migration 20261127000001). */
const TRIGGERS = [
  ['orders', 'orders_event'],
  ['payments', 'payments_event'],
] as const;

/**
 * What the transactional outbox costs end to end (issue 28: "the keyed create's and the payment's
 * throughput with the outbox on, against without; target within 10%"). The same keyed order creates
 * and payments, interleaved in rounds, with the event triggers enabled and then disabled on the
 * scratch database before each segment (`ALTER TABLE … DISABLE TRIGGER`, between segments, with no
 * request in flight). Disabled is a what-if of this benchmark only: the service has no such setting,
 * every change writes its event.
 */
export async function outboxScenario(ctx: BenchRun): Promise<void> {
  const { P, log, results, rows, idemOrder, sql, server } = ctx;
  const setTriggers = (on: boolean) => async () => {
    for (const [table, trigger] of TRIGGERS)
      await sql.query(`ALTER TABLE ${table} ${on ? 'ENABLE' : 'DISABLE'} TRIGGER ${trigger}`);
  };
  const prefix = `obx-${ctx.runId}`;
  log(`outbox: creating ${P.paymentOrders} orders to pay`);
  const payments = await ordersToPay(ctx, prefix, P.paymentOrders);
  const eventsBefore = await count(sql, 'SELECT count(*) AS n FROM events');
  const specs: Spec[] = [
    { name: 'outbox-on-orders', url: server.url, next: idemOrder, before: setTriggers(true) },
    { name: 'outbox-off-orders', url: server.url, next: idemOrder, before: setTriggers(false) },
    { name: 'outbox-on-payments', url: server.url, next: payments.next, before: setTriggers(true) },
    { name: 'outbox-off-payments', url: server.url, next: payments.next, before: setTriggers(false) },
  ];
  let r: Awaited<ReturnType<typeof interleaved>>;
  try {
    log(
      `outbox: ${specs.map((s) => s.name).join(', ')}; ${P.pairedRounds} rounds of ${P.pairedSegment}s each`,
    );
    r = await interleaved(ctx, specs, P.pairedRounds, P.pairedSegment);
  } finally {
    await setTriggers(true)();
  }
  // Reported: the events the run wrote per final answer of the arms with the triggers on (the arms
  // with them off write none).
  const events = (await count(sql, 'SELECT count(*) AS n FROM events')) - eventsBefore;
  const on = r['outbox-on-orders'].created + r['outbox-on-payments'].created;
  results.outbox = { eventsWritten: events, finalAnswersWithTriggers: on, eventsPerAnswer: events / on };
  const compare = (id: string, scenario: string, onArm: string, offArm: string, extra = '') => {
    const { value, text } = armsRatio(r[onArm], r[offArm]);
    rows.push(loadRow(id, scenario, r[onArm], text + extra, 'on ÷ off ≥ 0.90', value >= 0.9));
  };
  compare(
    'outbox-orders',
    'Outbox: keyed order create, events on ÷ off',
    'outbox-on-orders',
    'outbox-off-orders',
  );
  compare(
    'outbox-payments',
    'Outbox: payment, events on ÷ off',
    'outbox-on-payments',
    'outbox-off-payments',
    payments.exhausted() ? ' (orders ran out)' : '',
  );
  log(`outbox: ${events} events written by ${on} final answers with the triggers on`);
}
