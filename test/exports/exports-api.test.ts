import { expect } from 'chai';
import { createServiceClient, waitForExport } from '../../client/index.js';
import { sqlRows } from '../../core/sql.js';
import { parseEventRow, renderEventData } from '../../events/render.js';
import { fencedUpdate, takeRowLease } from '../../idempotency/row-lease.js';
import { runExport } from '../../routers/exports/export-run.js';
import { purgeExpiredExportParts } from '../../server/background-effects.js';
import { http } from '../support/http.js';
import { createOrder } from '../support/orders.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, tokenFor, uniqueTenant } from '../support/tokens.js';
import { expectError } from '../support/users.js';
import { csvObjects, insertOrders, ordersOf, parseCsv, startExport, untilFinal } from './support.js';

const USER_A = '910000001';
const USER_B = '910000002';

async function db() {
  return (await sharedServer()).services.sequelize;
}

/** An export row written directly (no job): its lease held far ahead, so no worker touches it. */
async function heldExport(tenant: string, userId: string, extra = ''): Promise<string> {
  const [row] = await sqlRows<{ id: string }>(
    await db(),
    `INSERT INTO exports (tenant_id, user_id, all_users, resource, format, snapshot_at, lease_owner, lease_until${extra ? ', status, completed_at, expires_at, row_count, bytes' : ''})
     VALUES ($1, $2, false, 'orders', 'csv', now(), 'held-by-test', now() + interval '1 hour'${extra})
     RETURNING id::text AS id`,
    [tenant, userId],
  );
  return row.id;
}

async function tenantWithOrders(countA = 7, countB = 3) {
  const tenant = uniqueTenant('exp');
  const sequelize = await db();
  await insertOrders(sequelize, { tenant, userId: USER_A, count: countA, prefix: 'a' });
  await insertOrders(sequelize, { tenant, userId: USER_B, count: countB, prefix: 'b' });
  return tenant;
}

async function exportFile(auth: Record<string, string>, body: Record<string, unknown>) {
  const started = await startExport(auth, body);
  expect(started.status, started.text).to.equal(202);
  const id = started.body.data.resourceId as string;
  const final = await untilFinal(auth, id);
  expect(final.status, JSON.stringify(final)).to.equal('SUCCEEDED');
  const file = await http('GET', `/api/v1/exports/${id}/file`, { headers: auth });
  expect(file.status, file.text).to.equal(200);
  return { id, final, file };
}

describe('exports: POST /exports, GET /exports/{id}, GET /exports/{id}/file (CONTRACT section 11)', function () {
  this.timeout(60000);

  it('when an export is started, then 202 with Location, Retry-After and the task id; a retry with the key replays it; another body with it is 409 40901', async () => {
    const tenant = await tenantWithOrders(2, 0);
    const auth = bearer(tenant, USER_A);
    const key = idempotencyKey();
    const first = await startExport(auth, { resource: 'orders' }, { key });
    expect(first.status, first.text).to.equal(202);
    const id = first.body.data.resourceId;
    expect(first.body).to.deep.include({ code: 202 });
    expect(first.body.data).to.deep.equal({ status: 'PROCESSING', resourceId: id });
    expect(first.headers.get('location')).to.equal(`/api/v1/exports/${id}`);
    expect(Number(first.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    const again = await startExport(auth, { resource: 'orders', format: 'csv' }, { key });
    expect(again.status).to.equal(202);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body.data.resourceId).to.equal(id);
    expect(again.headers.get('location')).to.equal(`/api/v1/exports/${id}`);
    const other = await startExport(auth, { resource: 'payments' }, { key });
    expect(other.status).to.equal(409);
    expect(other.body.code).to.equal(40901);
    const [{ n }] = await sqlRows<{ n: number }>(
      await db(),
      'SELECT count(*)::int AS n FROM exports WHERE tenant_id = $1',
      [tenant],
    );
    expect(n).to.equal(1);
  });

  it('when filters are bad (resource, format, dates, from after to, unknown field) or the key is missing, then 400 and nothing is created', async () => {
    const tenant = uniqueTenant('exp');
    const auth = bearer(tenant, USER_A);
    // [body, the field the 400 names, its whole message where the test pins it]
    const bad: Array<[Record<string, unknown>, string, string?]> = [
      [{ resource: 'users' }, 'resource'],
      [{}, 'resource'],
      [{ resource: 'orders', format: 'xml' }, 'format'],
      [{ resource: 'orders', createdFrom: 'yesterday' }, 'createdFrom'],
      // A date alone, or a time without a zone, is ambiguous at a range's end: refused, not guessed.
      [
        { resource: 'orders', createdTo: '2026-01-31' },
        'createdTo',
        'createdTo: must be an ISO 8601 date-time with Z or an offset, e.g. 2026-01-01T00:00:00Z',
      ],
      [{ resource: 'orders', createdFrom: '2026-01-01T00:00:00' }, 'createdFrom'],
      [{ resource: 'orders', createdTo: '2026-13-01T00:00:00Z' }, 'createdTo'],
      // ISO's year 0000 parses in JS but not in PostgreSQL (a 500 before it was refused).
      [{ resource: 'orders', createdFrom: '0000-01-01T00:00:00Z' }, 'createdFrom'],
      [
        { resource: 'orders', createdFrom: '2026-02-01T00:00:00Z', createdTo: '2026-01-01T00:00:00Z' },
        'createdFrom',
      ],
      [{ resource: 'orders', limit: 5 }, 'limit'],
    ];
    for (const [body, field, message] of bad) {
      const res = await startExport(auth, body);
      expectError(res, 400);
      expect(res.body.message, JSON.stringify(body)).to.match(new RegExp(`^${field}\\b`));
      if (message) expect(res.body.message).to.equal(message);
    }
    const keyless = await http('POST', '/api/v1/exports', { headers: auth, body: { resource: 'orders' } });
    expectError(keyless, 400);
    const [{ n }] = await sqlRows<{ n: number }>(
      await db(),
      'SELECT count(*)::int AS n FROM exports WHERE tenant_id = $1',
      [tenant],
    );
    expect(n).to.equal(0);
  });

  it("when a user exports orders as CSV, then the file holds exactly its own rows in id order, and the admin's the tenant's", async () => {
    const tenant = await tenantWithOrders(7, 3);
    const sequelize = await db();
    const own = await exportFile(bearer(tenant, USER_A), { resource: 'orders' });
    expect(own.file.headers.get('content-type')).to.equal('text/csv; charset=utf-8');
    expect(own.file.headers.get('content-disposition')).to.match(/^attachment; filename="export-\d+\.csv"$/);
    expect(csvObjects(own.file.text)).to.deep.equal(await ordersOf(sequelize, tenant, USER_A));
    expect(own.final.rowCount).to.equal(7);
    expect(own.final.bytes).to.equal(Buffer.byteLength(own.file.text));
    const all = await exportFile(bearer(tenant, '1', 'admin'), { resource: 'orders' });
    expect(csvObjects(all.file.text)).to.deep.equal(await ordersOf(sequelize, tenant));
    expect(all.final.rowCount).to.equal(10);
  });

  it('when a description holds a comma, a quote and a line break, then the CSV quotes it (RFC 4180) and NDJSON parses back to the transfer objects', async () => {
    const tenant = uniqueTenant('exp');
    const sequelize = await db();
    const tricky = 'a, "quoted"\r\nsecond line';
    await insertOrders(sequelize, { tenant, userId: USER_A, count: 2, prefix: 'q', description: tricky });
    const auth = bearer(tenant, USER_A);
    const csv = await exportFile(auth, { resource: 'orders' });
    expect(csv.file.text).to.include('"a, ""quoted""\r\nsecond line"');
    const records = parseCsv(csv.file.text);
    expect(records).to.have.length(3);
    expect(records[1][records[0].indexOf('description')]).to.equal(tricky);
    const nd = await exportFile(auth, { resource: 'orders', format: 'ndjson' });
    expect(nd.file.headers.get('content-type')).to.equal('application/x-ndjson');
    const lines = nd.file.text.split('\n');
    expect(lines.pop()).to.equal('');
    expect(lines.map((l) => JSON.parse(l))).to.deep.equal(await ordersOf(sequelize, tenant, USER_A));
  });

  it('when one description is empty and another null, then the CSV tells them apart ("" quoted, null an empty field), as NDJSON does', async () => {
    const tenant = uniqueTenant('exp');
    const sequelize = await db();
    await insertOrders(sequelize, { tenant, userId: USER_A, count: 1, prefix: 'e', description: '' });
    await insertOrders(sequelize, { tenant, userId: USER_A, count: 1, prefix: 'n' });
    const auth = bearer(tenant, USER_A);
    const expected = await ordersOf(sequelize, tenant, USER_A);
    expect(expected.map((o) => o.description)).to.have.members(['', null]);
    const csv = await exportFile(auth, { resource: 'orders' });
    const [header, ...records] = parseCsv(csv.file.text);
    const column = header.indexOf('description');
    expect(records.map((r) => r[column])).to.deep.equal(expected.map((o) => o.description));
    expect(csvObjects(csv.file.text)).to.deep.equal(expected);
    const nd = await exportFile(auth, { resource: 'orders', format: 'ndjson' });
    const lines = nd.file.text.split('\n').filter((l) => l !== '');
    expect(lines.map((l) => JSON.parse(l).description)).to.deep.equal(expected.map((o) => o.description));
  });

  it('when createdFrom/createdTo are given, then only rows created in that window are exported', async () => {
    const tenant = uniqueTenant('exp');
    const sequelize = await db();
    const end = new Date(Date.now() - 60_000);
    await insertOrders(sequelize, { tenant, userId: USER_A, count: 10, prefix: 'w', endAt: end });
    // Created at end-9s .. end: the window end-5s .. end-2s holds 4 of them.
    const from = new Date(end.getTime() - 5000).toISOString();
    const to = new Date(end.getTime() - 2000).toISOString();
    const { file, final } = await exportFile(bearer(tenant, USER_A), {
      resource: 'orders',
      format: 'ndjson',
      createdFrom: from,
      createdTo: to,
    });
    const expected = (await ordersOf(sequelize, tenant, USER_A)).filter(
      (o) => String(o.createdAt) >= from && String(o.createdAt) <= to,
    );
    expect(expected).to.have.length(4);
    expect(final.rowCount).to.equal(4);
    expect(
      file.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).to.deep.equal(expected);
  });

  it('when createdFrom/createdTo fall within one millisecond, then rows are compared to the microsecond', async () => {
    const tenant = uniqueTenant('exp');
    const sequelize = await db();
    await insertOrders(sequelize, { tenant, userId: USER_A, count: 3, prefix: 'us' });
    // Created at .000100, .000400 and .000700 s: one millisecond, which a JS Date cannot tell apart.
    await sqlRows(
      sequelize,
      `UPDATE orders o SET created_at = '2026-01-01T00:00:00.0001Z'::timestamptz + (s.n - 1) * interval '300 microseconds'
         FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM orders WHERE tenant_id = $1) s
        WHERE o.id = s.id`,
      [tenant],
    );
    const { file, final } = await exportFile(bearer(tenant, USER_A), {
      resource: 'orders',
      format: 'ndjson',
      createdFrom: '2026-01-01T00:00:00.0002Z',
      createdTo: '2026-01-01T00:00:00.0006Z',
    });
    expect(final.rowCount).to.equal(1);
    expect(JSON.parse(file.text).merchantOrderNo).to.equal('us-2');
  });

  it('when payments are exported, then each line is the payment as GET /payments/{id} answers it', async () => {
    const tenant = uniqueTenant('exp');
    const auth = bearer(tenant, USER_A);
    const paid: unknown[] = [];
    for (const no of ['p-1', 'p-2']) {
      await createOrder(undefined, auth, no, '12.30');
      const res = await http('POST', '/api/v1/payments', {
        headers: { ...auth, 'Idempotency-Key': idempotencyKey() },
        body: { merchantOrderNo: no, amount: '12.30' },
      });
      expect(res.status, res.text).to.equal(201);
      paid.push((await http('GET', `/api/v1/payments/${res.body.data.id}`, { headers: auth })).body.data);
    }
    const { file, final } = await exportFile(auth, { resource: 'payments', format: 'ndjson' });
    expect(final.rowCount).to.equal(2);
    const lines = file.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : 1);
    expect([...lines].sort(byId)).to.deep.equal([...(paid as Array<{ id: string }>)].sort(byId));
  });

  it('when there are no matching rows, then CSV is the header line alone and NDJSON is empty', async () => {
    const tenant = uniqueTenant('exp');
    const csv = await exportFile(bearer(tenant, USER_A), { resource: 'payments' });
    expect(parseCsv(csv.file.text)).to.have.length(1);
    expect(parseCsv(csv.file.text)[0]).to.include.members(['id', 'paymentNo', 'merchantOrderNo', 'status']);
    const nd = await exportFile(bearer(tenant, USER_A), { resource: 'payments', format: 'ndjson' });
    expect(nd.file.text).to.equal('');
    expect(nd.final).to.deep.include({ rowCount: 0, bytes: 0 });
  });

  it('when another user of the tenant asks for an export or its file, then 403; another tenant 404; an admin of the tenant gets it', async () => {
    const tenant = await tenantWithOrders(1, 0);
    const { id } = await exportFile(bearer(tenant, USER_A), { resource: 'orders' });
    for (const [auth, status] of [
      [bearer(tenant, USER_B), 403],
      [bearer(uniqueTenant('exp'), USER_A, 'admin'), 404],
    ] as const) {
      expectError(await http('GET', `/api/v1/exports/${id}`, { headers: auth }), status);
      expectError(await http('GET', `/api/v1/exports/${id}/file`, { headers: auth }), status);
    }
    const admin = bearer(tenant, '1', 'admin');
    expect((await http('GET', `/api/v1/exports/${id}`, { headers: admin })).status).to.equal(200);
    expect((await http('GET', `/api/v1/exports/${id}/file`, { headers: admin })).status).to.equal(200);
    expectError(await http('GET', `/api/v1/exports/${id}/file`), 401);
    expectError(await http('GET', '/api/v1/exports/abc/file', { headers: admin }), 400);
    expectError(await http('GET', '/api/v1/exports/999999999999/file', { headers: admin }), 404);
    const wrong = await http('POST', `/api/v1/exports/${id}/file`, { headers: admin });
    expectError(wrong, 405);
    expect(wrong.headers.get('allow')).to.equal('GET');
  });

  it('when the export is still PROCESSING, then its file is 409 40903 and GET shows PROCESSING with null figures', async () => {
    const tenant = uniqueTenant('exp');
    const auth = bearer(tenant, USER_A);
    const id = await heldExport(tenant, USER_A);
    expectError(await http('GET', `/api/v1/exports/${id}/file`, { headers: auth }), 409, 40903);
    const got = await http('GET', `/api/v1/exports/${id}`, { headers: auth });
    expect(got.body.data).to.deep.include({
      id,
      status: 'PROCESSING',
      rowCount: null,
      bytes: null,
      completedAt: null,
      expiresAt: null,
    });
  });

  it('when the export expired, then its file is 404 (GET still shows it), and the purge deletes its parts', async () => {
    const tenant = await tenantWithOrders(3, 0);
    const auth = bearer(tenant, USER_A);
    const { id } = await exportFile(auth, { resource: 'orders' });
    const sequelize = await db();
    await sqlRows(sequelize, "UPDATE exports SET expires_at = now() - interval '1 second' WHERE id = $1", [
      id,
    ]);
    expectError(await http('GET', `/api/v1/exports/${id}/file`, { headers: auth }), 404);
    expect((await http('GET', `/api/v1/exports/${id}`, { headers: auth })).body.data.status).to.equal(
      'SUCCEEDED',
    );
    await purgeExpiredExportParts(sequelize, new AbortController().signal);
    const [{ n }] = await sqlRows<{ n: number }>(
      sequelize,
      'SELECT count(*)::int AS n FROM export_parts WHERE export_id = $1',
      [id],
    );
    expect(n).to.equal(0);
  });

  it('when the rows are more than EXPORT_MAX_ROWS, then the export FAILS with TOO_MANY_ROWS and writes no part', async () => {
    const tenant = await tenantWithOrders(3, 0);
    const auth = bearer(tenant, USER_A);
    const sequelize = await db();
    const [row] = await sqlRows<{ id: string }>(
      sequelize,
      `INSERT INTO exports (tenant_id, user_id, all_users, resource, format, snapshot_at)
       VALUES ($1, $2, false, 'orders', 'csv', now()) RETURNING id::text AS id`,
      [tenant, USER_A],
    );
    const work = { sequelize, leaseMs: 5000, maxRows: 2, ttlHours: 1 };
    expect(await runExport(work, row.id)).to.equal('failed');
    const got = await http('GET', `/api/v1/exports/${row.id}`, { headers: auth });
    expect(got.body.data).to.deep.include({
      status: 'FAILED',
      failureReason: 'TOO_MANY_ROWS',
      rowCount: null,
    });
    expectError(await http('GET', `/api/v1/exports/${row.id}/file`, { headers: auth }), 409, 40903);
    const events = await sqlRows<{ type: string; row: string }>(
      sequelize,
      'SELECT type, row::text AS row FROM events WHERE resource_id = $1 AND type LIKE $2',
      [row.id, 'export.%'],
    );
    expect(events.map((e) => e.type)).to.deep.equal(['export.failed']);
    expect(renderEventData(events[0].type, parseEventRow(events[0].row))).to.deep.equal(got.body.data);
    const [{ n }] = await sqlRows<{ n: number }>(
      sequelize,
      'SELECT count(*)::int AS n FROM export_parts WHERE export_id = $1',
      [row.id],
    );
    expect(n).to.equal(0);
  });

  it('when a worker lost its lease (taken over after it expired), then its late write changes nothing, and the export still holds every row once', async () => {
    const tenant = await tenantWithOrders(12, 0);
    const sequelize = await db();
    const [row] = await sqlRows<{ id: string }>(
      sequelize,
      `INSERT INTO exports (tenant_id, user_id, all_users, resource, format, snapshot_at)
       VALUES ($1, $2, false, 'orders', 'ndjson', now()) RETURNING id::text AS id`,
      [tenant, USER_A],
    );
    const stale = await takeRowLease(sequelize, 'exports', row.id, 60_000);
    expect(stale).to.not.equal(undefined);
    // Held: nobody else may take it.
    expect(
      await runExport({ sequelize, leaseMs: 5000, maxRows: 100, ttlHours: 1, partRows: 5 }, row.id),
    ).to.equal('busy');
    await sqlRows(sequelize, "UPDATE exports SET lease_until = now() - interval '1 second' WHERE id = $1", [
      row.id,
    ]);
    const result = await runExport(
      { sequelize, leaseMs: 5000, maxRows: 100, ttlHours: 1, partRows: 5 },
      row.id,
    );
    expect(result).to.equal('succeeded');
    const late = await fencedUpdate(
      sequelize,
      stale as NonNullable<typeof stale>,
      'parts_written = parts_written + 1',
      [],
    );
    expect(late).to.equal(undefined);
    const parts = await sqlRows<{ data: string; rows: number }>(
      sequelize,
      'SELECT data, rows FROM export_parts WHERE export_id = $1 ORDER BY part_no',
      [row.id],
    );
    expect(parts.map((p) => p.rows)).to.deep.equal([5, 5, 2]);
    const lines = parts
      .map((p) => p.data)
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).to.deep.equal(await ordersOf(sequelize, tenant, USER_A));
  });

  it('when an export finishes, then one export.succeeded event is written with the Export as data (rowCount and bytes as integers)', async () => {
    const tenant = await tenantWithOrders(4, 0);
    const { id, final } = await exportFile(bearer(tenant, USER_A), { resource: 'orders' });
    const events = await sqlRows<{ type: string; row: string }>(
      await db(),
      "SELECT type, row::text AS row FROM events WHERE tenant_id = $1 AND type LIKE 'export.%' AND resource_id = $2",
      [tenant, id],
    );
    expect(events.map((e) => e.type)).to.deep.equal(['export.succeeded']);
    expect(parseEventRow(events[0].row)).to.not.have.property('lease_owner');
    expect(renderEventData(events[0].type, parseEventRow(events[0].row))).to.deep.equal(final);
  });

  it('when the typed client starts an export over tRPC, then waitForExport returns it final', async () => {
    const tenant = await tenantWithOrders(5, 0);
    const { url } = await sharedServer();
    const client = createServiceClient({ url, token: tokenFor(tenant, USER_A) });
    const started = await client.trpc.exports.create.mutate({ resource: 'orders', format: 'ndjson' });
    expect(started.code).to.equal(202);
    const id = (started.data as { resourceId: string }).resourceId;
    const done = await waitForExport(client.trpc, id, { timeoutMs: 60_000, intervalMs: 200 });
    expect(done).to.deep.include({ id, status: 'SUCCEEDED', rowCount: 5, format: 'ndjson' });
  });
});
