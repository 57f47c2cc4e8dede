import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchRun } from '../bench-run.js';
import {
  combine,
  count,
  interleaved,
  loadRow,
  measure,
  ordersToPay,
  rowsLabel,
  sendAll,
} from '../measure.js';
import { memoryOf } from '../processes.js';
import { r2, ratio } from '../report.js';
import { USERS } from '../settings.js';

/** A refund's amount: ten fit in one 10.50 payment, so a payment can be refunded again in a later lap. */
const REFUND = '1.00';

/**
 * Refunds against payments (issue 27: "a refund costs no more than a payment"): payments of fresh
 * orders and partial refunds of payments made beforehand (through the API, so that the gateway
 * simulator knows their charges), interleaved in rounds; compared by CPU per answer (service plus
 * PostgreSQL), and by answers per second, reported.
 */
export async function refundsScenario(ctx: BenchRun): Promise<void> {
  const { P, CONNECTIONS, log, rows, cpuTable, users, sql, server } = ctx;
  const payPrefix = `efp-${ctx.runId}`;
  const refundPrefix = `efr-${ctx.runId}`;
  log(`refunds: creating ${P.paymentOrders} orders to pay and paying ${P.refundPayments} to refund`);
  const fresh = await ordersToPay(ctx, payPrefix, P.paymentOrders);
  const toRefund = await ordersToPay(ctx, refundPrefix, P.refundPayments);
  const prepaid = await sendAll(
    server.url,
    Array.from({ length: P.refundPayments }, (_, i) => toRefund.pay(i + 1)),
    CONNECTIONS,
  );
  const payments = (
    await sql.query<{ id: string; no: string }>(
      `SELECT id::text, merchant_order_no AS no FROM payments
        WHERE merchant_order_no LIKE $1 || '-%' AND status = 'SUCCEEDED' ORDER BY id`,
      [refundPrefix],
    )
  ).rows.map((p) => ({ id: p.id, g: Number(p.no.slice(refundPrefix.length + 1)) }));
  if (payments.length < P.refundPayments / 2)
    throw new Error(
      `refunds: only ${payments.length} payments succeeded (${JSON.stringify(prepaid.statuses)})`,
    );
  let refunded = 0;
  const r = await interleaved(
    ctx,
    [
      {
        name: 'effect-payments',
        url: server.url,
        next: fresh.next,
      },
      {
        name: 'refunds',
        url: server.url,
        next: () => {
          const n = refunded++;
          // Ten laps at most: the eleventh 1.00 would exceed the 10.50 paid (409 40906, a miss here).
          const p = payments[n % payments.length];
          return {
            method: 'POST',
            path: `/api/v1/payments/${p.id}/refunds`,
            headers: { authorization: users[p.g % USERS], 'idempotency-key': randomUUID() },
            body: JSON.stringify({ amount: REFUND }),
          };
        },
      },
    ],
    P.pairedRounds,
    P.pairedSegment,
  );
  const cpu = (name: string) => {
    const c = cpuTable.find((x) => x.name === name);
    return c ? c.service + c.postgres : Number.NaN;
  };
  const v = ratio(cpu('refunds'), cpu('effect-payments'));
  rows.push(
    loadRow(
      'refunds',
      'Refund (partial), CPU per answer ÷ a payment’s',
      r.refunds,
      `${r2(v)} (req/s ÷ payment ${r2(ratio(r.refunds.rps, r['effect-payments'].rps))})`,
      '≤ 1.00',
      v <= 1 && refunded <= payments.length * 10,
    ),
  );
  if (fresh.exhausted()) log('refunds: the orders to pay ran out (payments answered 409 at the end)');
}

/**
 * An export of EXPORT rows (issue 27): rows per second, the service's RSS while it runs and while the
 * file is downloaded, and the request path's p99 during the export against without one (keyed order
 * creates at the bench's concurrency; segments without an export before and after it). The rows are
 * one user's orders, inserted by SQL with the outbox trigger off (seeding, not the service's writes).
 */
export async function exportScenario(ctx: BenchRun): Promise<void> {
  const { P, log, results, rows, idemOrder, sql, server } = ctx;
  const n = P.exportRows;
  const owner = 9_300_000_001;
  const token = ctx.token(owner, 'user');
  const t0 = Date.now();
  await sql.query('ALTER TABLE orders DISABLE TRIGGER orders_event');
  try {
    await sql.query(
      `INSERT INTO orders (tenant_id, user_id, merchant_order_no, amount, currency)
       SELECT 'bench', $1::bigint, 'exp-' || g, 10.50, 'USD' FROM generate_series(1, $2::int) g`,
      [owner, n],
    );
  } finally {
    await sql.query('ALTER TABLE orders ENABLE TRIGGER orders_event');
  }
  await sql.query('VACUUM (ANALYZE) orders');
  log(`export: ${n} orders inserted in ${((Date.now() - t0) / 1000).toFixed(1)}s`);

  const quiet = [await measure(ctx, 'export-off', server.url, P.exportQuietSegment, idemOrder)];
  const started = await fetch(`${server.url}/api/v1/exports`, {
    method: 'POST',
    headers: { authorization: token, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
    body: JSON.stringify({ resource: 'orders', format: 'csv' }),
  });
  const answer = (await started.json()) as { data: { resourceId: string } };
  if (started.status !== 202) throw new Error(`export: ${started.status} ${JSON.stringify(answer)}`);
  const id = answer.data.resourceId;
  const exportStarted = performance.now();
  let rssPeak = 0;
  const sampleRss = () => {
    rssPeak = Math.max(rssPeak, memoryOf(server.pid)?.rssMb ?? 0);
  };
  let status = 'PROCESSING';
  let rowCount: number | null = null;
  let exportSeconds = Number.NaN;
  const finished = (async () => {
    while (status === 'PROCESSING') {
      await sleep(200);
      sampleRss();
      const res = await fetch(`${server.url}/api/v1/exports/${id}`, { headers: { authorization: token } });
      const body = (await res.json()) as { data: { status: string; rowCount: number | null } };
      status = body.data.status;
      rowCount = body.data.rowCount;
    }
    exportSeconds = (performance.now() - exportStarted) / 1000;
  })();
  const during = await measure(ctx, 'export-on', server.url, 3600, idemOrder, { stopWhen: finished });
  await finished;
  if (status !== 'SUCCEEDED' || rowCount !== n)
    throw new Error(`export ${id}: ${status}, ${rowCount} rows of ${n}`);
  quiet.push(await measure(ctx, 'export-off', server.url, P.exportQuietSegment, idemOrder));
  const without = combine(quiet);

  // The file, streamed to this process and counted (a header line and one line a row).
  const rssBeforeDownload = memoryOf(server.pid)?.rssMb ?? Number.NaN;
  let downloadPeak = 0;
  const downloadStarted = performance.now();
  const file = await fetch(`${server.url}/api/v1/exports/${id}/file`, { headers: { authorization: token } });
  if (file.status !== 200 || !file.body) throw new Error(`export file: ${file.status}`);
  let lines = 0;
  let bytes = 0;
  let chunks = 0;
  for await (const chunk of file.body) {
    bytes += chunk.length;
    // Newlines found by indexOf (native), not a JS loop over 99 MB: the download time is the service's.
    for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines += 1;
    if (++chunks % 64 === 0) downloadPeak = Math.max(downloadPeak, memoryOf(server.pid)?.rssMb ?? 0);
  }
  const downloadSeconds = (performance.now() - downloadStarted) / 1000;
  if (lines !== n + 1) throw new Error(`export file: ${lines} lines for ${n} rows and a header`);
  const exported = await count(sql, `SELECT count(*) AS n FROM export_parts WHERE export_id = $1`, [id]);
  results.export = {
    rows: n,
    exportSeconds,
    rowsPerSecond: n / exportSeconds,
    rssPeakDuringExportMb: rssPeak,
    rssBeforeDownloadMb: rssBeforeDownload,
    rssPeakDuringDownloadMb: downloadPeak,
    fileBytes: bytes,
    downloadSeconds,
    parts: exported,
    with: during,
    without,
  };
  log(
    `export: ${n} rows in ${exportSeconds.toFixed(1)}s (${(n / exportSeconds).toFixed(0)} rows/s), RSS peak ${rssPeak.toFixed(0)} MB; file ${(bytes / 1e6).toFixed(0)} MB in ${downloadSeconds.toFixed(1)}s, RSS peak ${downloadPeak.toFixed(0)} MB`,
  );
  const v = ratio(during.p99, without.p99);
  rows.push(
    loadRow(
      'export-p99',
      `Export of ${rowsLabel(n)} rows: keyed create p99 during ÷ without`,
      during,
      r2(v),
      '≤ 1.30',
      v <= 1.3,
    ),
  );
  rows.push({
    id: 'export',
    scenario: `Export of ${rowsLabel(n)} rows (CSV): rows/s; service RSS peak while exporting / downloading`,
    value: `${(n / exportSeconds).toFixed(0)} rows/s; ${rssPeak.toFixed(0)} / ${downloadPeak.toFixed(0)} MB`,
    target: 'RSS ≤ 200 MB',
    pass: Math.max(rssPeak, downloadPeak) <= 200,
  });
}
