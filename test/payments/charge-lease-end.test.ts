import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createGatewayClient } from '../../gateway/client.js';
import { type GatewaySimulator, startGatewaySimulator } from '../../gateway/simulator.js';
import type { GatewayClient } from '../../gateway/types.js';
import type { Payment } from '../../models/payment.js';
import type { PaymentDeps } from '../../payments/payment-deps.js';
import { paymentEffect } from '../../payments/payment-effect.js';

/**
 * The charge is the effect's downstream call: it stops when the lease it runs under ends (the signal
 * the mechanism hands every perform, idempotency/effect-settle.ts), as a refund's does. Its outcome is
 * then unknown, never "not charged": the simulator records a charge before its delayed answer, and
 * the query that comes first on the next attempt finds it.
 */
describe('payments: a charge stops when its lease ends', () => {
  let sim: GatewaySimulator;
  let client: GatewayClient;

  before(async () => {
    sim = await startGatewaySimulator();
    // The client's own time-out is far off: only the lease's end can stop this charge early.
    client = createGatewayClient({ baseUrl: sim.url, timeoutMs: 30000 });
    await client.setFaults({ latencyMs: 2000 });
  });
  after(async () => {
    await client?.close();
    await sim?.close();
  });

  it('when the lease ends while the gateway has not answered, then the charge is unknown and its query finds it', async () => {
    const paymentNo = `pay_${randomUUID()}`;
    const row = { paymentNo, amount: '12.50', currency: 'USD' } as unknown as Payment;
    const deps = { gateway: client } as unknown as PaymentDeps;
    const leaseEnds = AbortSignal.timeout(100);
    const performed = await paymentEffect.perform(deps, row, leaseEnds);
    expect(leaseEnds.aborted, 'the lease ended first').to.equal(true);
    expect(performed).to.deep.equal({ kind: 'unknown' });

    await client.setFaults({});
    const queried = await paymentEffect.query(deps, row);
    expect(queried.kind).to.equal('done');
    expect(queried.kind === 'done' && queried.result).to.include({ paymentNo, status: 'SUCCEEDED' });
  });
});
