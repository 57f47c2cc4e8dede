// Regression test of issue 10, defect 9 (the recoverer part): one payment that fails inside the
// recoverer's round (its row gone, the database busy, a gateway error) must not stop the others.
// Before the fix, the first failing payment's error left the recoverer's sweep (then recoverExpiredPayments), and every payment
// after it in the batch stayed PROCESSING until that one stopped failing (for ever, for a missing row).
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient } from '../../gateway/types.js';
import { sweepExpired } from '../../idempotency/effect-recover.js';
import type { PaymentDeps } from '../../payments/payment-deps.js';
import { PAYMENT_OPERATION, paymentEffect } from '../../payments/payment-effect.js';
import { paymentRow, processingRecord } from '../gateway/reconcile-fixtures.js';
import { sharedServer } from '../support/server.js';
import { uniqueTenant } from '../support/tokens.js';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

describe('payments: the recoverer goes on past a payment that fails', () => {
  let sim: GatewaySimulator;
  let gateway: GatewayClient;
  let deps: PaymentDeps;

  before(async () => {
    const { services } = await sharedServer();
    sim = await startGatewaySimulator();
    gateway = createGatewayClient({ baseUrl: sim.url, timeoutMs: 5000 });
    deps = { sequelize: services.sequelize, engine: services.idempotency, gateway };
  });
  after(async () => {
    await gateway?.close();
    await sim?.close();
  });

  it('when the first abandoned payment of a round cannot be recovered, then the error is reported and the next one is still charged once and finalised', async () => {
    const tenant = uniqueTenant('rb');
    // Oldest lease first (the round's order): a record whose payment row is gone.
    const broken = await processingRecord(
      tenant,
      { id: `pay_missing_${hex(6)}` },
      new Date('2001-01-01T00:00:00Z'),
      PAYMENT_OPERATION,
    );
    const payment = await paymentRow(tenant, 'PROCESSING');
    const healthy = await processingRecord(
      tenant,
      payment,
      new Date('2001-01-01T00:00:01Z'),
      PAYMENT_OPERATION,
    );

    const errors: string[] = [];
    const taken = await sweepExpired(paymentEffect, deps, 1000, (scopeKey) => errors.push(scopeKey));

    expect(errors).to.include(broken.scopeKey);
    expect(errors).to.not.include(healthy.scopeKey);
    expect(taken).to.be.at.least(2);
    await payment.reload();
    expect(payment.status).to.equal('SUCCEEDED');
    const charges = (await gateway.ledger()).charges.filter((c) => c.paymentNo === payment.paymentNo);
    expect(charges).to.have.length(1);
    await healthy.reload();
    expect(healthy.status).to.equal('SUCCEEDED');
  });
});
