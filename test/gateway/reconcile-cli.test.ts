import { expect } from 'chai';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient } from '../../gateway/types.js';
import { ResponseCipher } from '../../idempotency/response-cipher.js';
import type { ReconcileReport } from '../../payments/reconcile.js';
import { reconcileCli } from '../support/reconcile-cli.js';
import { sharedServer, TEST_ENV } from '../support/server.js';
import { uniqueTenant } from '../support/tokens.js';
import { minutesFromNow, paymentRow, processingRecord } from './reconcile-fixtures.js';

/** `npm run reconcile -- <args>` on the test database (with the given PAYMENT_GATEWAY_URL, if any). */
const runCli = (args: string[], env: { PAYMENT_GATEWAY_URL?: string }) =>
  reconcileCli(process.env.TEST_DATABASE_URL ?? '', env.PAYMENT_GATEWAY_URL, args);

describe('reconcile CLI (npm run reconcile)', () => {
  let sim: GatewaySimulator;
  let gateway: GatewayClient;
  let tenant: string;

  before(async () => {
    await sharedServer(); // the migrated test database
  });
  beforeEach(async () => {
    sim = await startGatewaySimulator();
    gateway = createGatewayClient({ baseUrl: sim.url, timeoutMs: 5000 });
    tenant = uniqueTenant('rcli');
  });
  afterEach(async () => {
    await gateway.close();
    await sim.close();
  });

  const cli = (...args: string[]) =>
    runCli(['--json', '--merchant', tenant, ...args], { PAYMENT_GATEWAY_URL: sim.url });

  it('when the merchant matches the gateway, then it exits 0 with an empty JSON report', async () => {
    const payment = await paymentRow(tenant, 'SUCCEEDED');
    const outcome = await gateway.charge({ paymentNo: payment.paymentNo, amount: '25.00', currency: 'USD' });
    if (outcome.kind !== 'charged') throw new Error(outcome.kind);
    await payment.update({ chargeId: outcome.charge.chargeId });
    const run = await cli();
    expect(run.code, run.stderr).to.equal(0);
    const report = JSON.parse(run.stdout) as ReconcileReport;
    expect(report).to.include({ source: 'ledger', payments: 1, charges: 1, unresolved: 0 });
    expect(report.entries).to.deep.equal([]);
  });

  it('when a SUCCEEDED payment has no charge, then it exits 1 and the JSON lists it, even with --repair', async () => {
    const payment = await paymentRow(tenant, 'SUCCEEDED', { chargeId: 'ch_never_made' });
    const run = await cli('--repair');
    expect(run.code, run.stderr).to.equal(1);
    const report = JSON.parse(run.stdout) as ReconcileReport;
    expect(report.entries.map((e) => [e.kind, e.paymentNo, e.outcome])).to.deep.equal([
      ['succeeded-but-not-charged', payment.paymentNo, 'reported'],
    ]);
  });

  it('when run without --json, then a table names each mismatch and a SUCCEEDED payment without charge is called out', async () => {
    const payment = await paymentRow(tenant, 'SUCCEEDED', { chargeId: 'ch_never_made' });
    const run = await runCli(['--merchant', tenant], { PAYMENT_GATEWAY_URL: sim.url });
    expect(run.code, run.stderr).to.equal(1);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).to.match(
      /^reconcile \(report only\): 1 payments, 0 charges \(source: gateway ledger\)$/,
    );
    expect(lines[1]).to.match(/^KIND +PAYMENT NO +MERCHANT +LOCAL +OUTCOME +DETAIL$/);
    expect(lines[2]).to.match(
      new RegExp(`^succeeded-but-not-charged +${payment.paymentNo} +${tenant} +SUCCEEDED +reported `),
    );
    expect(lines[3]).to.match(/^!!! 1 SUCCEEDED payment\(s\) have no charge at the gateway/);
    expect(lines[4]).to.equal('1 mismatch(es), 1 unresolved');
  });

  it('when --repair finalises a charged PROCESSING payment, then it exits 0 and stores an answer the service can read', async () => {
    const payment = await paymentRow(tenant, 'PROCESSING');
    await gateway.charge({ paymentNo: payment.paymentNo, amount: '25.00', currency: 'USD' });
    const record = await processingRecord(tenant, payment, minutesFromNow(-1));
    const run = await cli('--repair');
    expect(run.code, run.stderr).to.equal(0);
    const report = JSON.parse(run.stdout) as ReconcileReport;
    expect(report.entries.map((e) => [e.kind, e.outcome])).to.deep.equal([
      ['processing-but-charged', 'repaired'],
    ]);
    await record.reload();
    expect(record.status).to.equal('SUCCEEDED');
    // Encrypted with the key from the environment, bound to the scope key: the service replays it.
    const cipher = new ResponseCipher('k1', Buffer.from(TEST_ENV.RESPONSE_ENCRYPTION_KEY, 'base64'));
    const stored = JSON.parse(cipher.decrypt(record.responseBody ?? '', record.scopeKey));
    expect(stored.s).to.equal(201);
    expect(stored.b.data).to.include({ id: payment.id, status: 'SUCCEEDED' });
  });

  it('when PAYMENT_GATEWAY_URL is unset, then it prints one line naming it and exits 2', async () => {
    const run = await runCli(['--json'], {});
    expect(run.code).to.equal(2);
    expect(run.stdout).to.equal('');
    expect(run.stderr.trim().split('\n')).to.have.length(1);
    expect(run.stderr).to.match(/^PAYMENT_GATEWAY_URL is required/);
  });

  it('when the gateway cannot be reached, then it reports the failure in one line and exits 2', async () => {
    const gone = await startGatewaySimulator();
    await gone.close();
    const run = await runCli(['--merchant', tenant], { PAYMENT_GATEWAY_URL: gone.url });
    expect(run.code).to.equal(2);
    expect(run.stderr.trim()).to.equal('reconcile failed: gateway ledger failed: refused');
  });

  it('when an option is unknown or a date is invalid, then it prints the usage and exits 2', async () => {
    const unknown = await runCli(['--force'], { PAYMENT_GATEWAY_URL: sim.url });
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.match(/usage: npm run reconcile/);
    const badDate = await runCli(['--since', 'yesterday-ish'], { PAYMENT_GATEWAY_URL: sim.url });
    expect(badDate.code).to.equal(2);
    expect(badDate.stderr).to.match(/--since/);
  });
});
