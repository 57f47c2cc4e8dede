import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import type { Charge } from '../../gateway/types.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import { startInstancesInParallel } from '../support/parallel-instances.js';
import { pay, payOrFail, payUntilFinal, shortLeaseEnv } from '../support/payment-calls.js';
import { assertPaymentInvariants } from '../support/payment-invariants.js';
import { type Instance, startInstance } from '../support/processes.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

// The gateway holds its answer for LATENCY_MS after recording the charge; the service waits up to
// GATEWAY_TIMEOUT_MS, so an instance killed right after the charge landed dies mid-call.
const LATENCY_MS = 700;
// Two gateway time-outs fit in 3/4 of the lease (CONTRACT section 8: one executor's worst case fits).
const ENV = { IDEMPOTENCY_LEASE_MS: '2500', GATEWAY_TIMEOUT_MS: '900' };
// The suite's instances never run the recoverer (interval of an hour), so that a takeover is
// certainly the client's retry; one test starts an instance with the recoverer on for itself.
const RECOVERER_OFF = { ...ENV, RECOVERER_INTERVAL_MS: '3600000' };
const RECOVERER_ON = { ...ENV, RECOVERER_INTERVAL_MS: '200' };

interface PaymentState {
  id: string;
  status: string;
  paymentNo: string;
}

describe('payments: crashes and lost answers (SIGKILL mid-charge, time-out after charge)', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let survivor: Instance;
  let victims: Instance[];

  before(async () => {
    db = await createIsolatedDatabase('crash');
    slot = await startGatewaySlot();
    [survivor, ...victims] = await startInstancesInParallel(
      4,
      shortLeaseEnv(db.url, slot.url, RECOVERER_OFF),
    );
  });
  beforeEach(() => slot.client.setFaults({}));
  after(async () => {
    for (const instance of [survivor, ...(victims ?? [])]) instance?.kill();
    await Promise.all([survivor, ...(victims ?? [])].map((i) => i?.exited));
    await slot?.close();
    await db?.drop();
  });

  async function setup() {
    const tenant = uniqueTenant('crash');
    const auth = bearer(tenant, '820000001');
    await createOrder(survivor.url, auth, 'mo-1', '42.00');
    return { tenant, auth, body: { merchantOrderNo: 'mo-1', amount: '42.00' } };
  }

  /** The charge recorded after `known` charges: the gateway records on arrival, before answering. */
  async function nextCharge(known: number): Promise<Charge> {
    for (let i = 0; i < 500; i++) {
      const { charges } = await slot.ledger();
      if (charges.length > known) return charges[known];
      await sleep(10);
    }
    throw new Error('the charge never reached the gateway');
  }

  async function paymentOf(tenant: string): Promise<PaymentState | undefined> {
    const rows = await db.sequelize.query<PaymentState>(
      'SELECT id, status, payment_no AS "paymentNo" FROM payments WHERE merchant_id = $1',
      { bind: [tenant], type: QueryTypes.SELECT },
    );
    return rows[0];
  }

  /** Instance `victim` receives a payment and is SIGKILLed while its gateway call is in flight. */
  async function killMidCharge(victim: Instance) {
    const { tenant, auth, body } = await setup();
    const key = idempotencyKey();
    const known = (await slot.ledger()).charges.length;
    const onVictim = payOrFail(victim.url, auth, key, body);
    const charge = await nextCharge(known);
    victim.kill();
    await victim.exited;
    expect((await onVictim).status, 'the victim must die before answering').to.equal(0);
    return { tenant, auth, body, key, charge };
  }

  /**
   * The client retries the same key on the survivor: 202 while the dead executor's lease is live,
   * then the final 201 of the same payment once the lease has expired and the retry took it over.
   */
  async function killMidChargeThenRetry(victim: Instance) {
    const { tenant, auth, body, key, charge } = await killMidCharge(victim);
    const first = await pay(survivor.url, auth, key, body);
    expect(first.status, first.text).to.equal(202);
    expect(first.body.data.status).to.equal('PROCESSING');
    const paymentId = first.body.data.resourceId;
    expect(first.headers.get('location')).to.equal(`/api/v1/payments/${paymentId}`);
    expect(Number(first.headers.get('retry-after'))).to.be.greaterThan(0);

    const retried = await payUntilFinal(survivor.url, auth, key, body, { retryable: [202] });
    expect(retried.final.status, retried.final.text).to.equal(201);
    // Executed by the takeover, not replayed: no recoverer runs in this suite's instances.
    expect(retried.final.headers.get('idempotent-replayed')).to.equal(null);
    expect(retried.final.body.data).to.include({
      id: paymentId,
      paymentNo: charge.paymentNo,
      status: 'SUCCEEDED',
    });
    return { tenant, charge };
  }

  it('when the instance is killed mid-charge, then a retry elsewhere gets 202, then 201 of the same payment, charged once', async () => {
    await slot.client.setFaults({ latencyMs: LATENCY_MS });
    const { tenant, charge } = await killMidChargeThenRetry(victims[0]);
    const { charges } = await slot.ledger();
    expect(charges.filter((c) => c.paymentNo === charge.paymentNo)).to.have.length(1);
    await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, { exclusiveLedger: true });
  });

  it('when the gateway times out after charging, then one charge and 201', async () => {
    const { tenant, auth, body } = await setup();
    await slot.client.setFaults({ timeoutAfterChargeRate: 1 });
    const res = await pay(survivor.url, auth, idempotencyKey(), body);
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data.status).to.equal('SUCCEEDED');
    const { charges } = await slot.ledger();
    expect(charges.filter((c) => c.paymentNo === res.body.data.paymentNo)).to.have.length(1);
    await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, { exclusiveLedger: true });
  });

  it('when the gateway ignores idempotency keys and times out after charging, then the service queries before anything else: one charge', async () => {
    const { tenant, auth, body } = await setup();
    await slot.client.setFaults({ timeoutAfterChargeRate: 1, ignoreIdempotencyKey: true });
    const key = idempotencyKey();
    const res = await pay(survivor.url, auth, key, body);
    expect(res.status, res.text).to.equal(201);
    const again = await pay(survivor.url, auth, key, body);
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const { charges } = await slot.ledger();
    expect(charges.filter((c) => c.paymentNo === res.body.data.paymentNo)).to.have.length(1);
    await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, {
      gatewayIgnoresKeys: true,
      exclusiveLedger: true,
    });
  });

  it('when the gateway ignores idempotency keys and the instance is killed mid-charge, then the takeover queries before charging: one charge', async () => {
    await slot.client.setFaults({ latencyMs: LATENCY_MS, ignoreIdempotencyKey: true });
    const { tenant, charge } = await killMidChargeThenRetry(victims[1]);
    const { charges } = await slot.ledger();
    // The gateway would have charged again: only the query-first takeover kept this at one.
    expect(charges.filter((c) => c.paymentNo === charge.paymentNo)).to.have.length(1);
    await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, {
      gatewayIgnoresKeys: true,
      exclusiveLedger: true,
    });
  });

  it('when the gateway ignores idempotency keys, the instance is killed mid-charge and nobody retries, then the recoverer queries before charging: one charge', async () => {
    await slot.client.setFaults({ latencyMs: LATENCY_MS, ignoreIdempotencyKey: true });
    const { tenant, auth, charge } = await killMidCharge(victims[2]);
    const recoverer = await startInstance(shortLeaseEnv(db.url, slot.url, RECOVERER_ON));
    try {
      let payment: PaymentState | undefined;
      for (let i = 0; i < 100 && payment?.status !== 'SUCCEEDED'; i++) {
        await sleep(200);
        payment = await paymentOf(tenant);
      }
      expect(payment).to.include({ status: 'SUCCEEDED', paymentNo: charge.paymentNo });
      const got = await pay(recoverer.url, auth, idempotencyKey(), {
        merchantOrderNo: 'mo-1',
        amount: '42.00',
      });
      expect(got.status).to.equal(201);
      expect(got.body.data).to.include({ id: payment!.id, status: 'SUCCEEDED' });
      const { charges } = await slot.ledger();
      expect(charges.filter((c) => c.paymentNo === charge.paymentNo)).to.have.length(1);
      await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, {
        gatewayIgnoresKeys: true,
        exclusiveLedger: true,
      });
    } finally {
      recoverer.kill();
      await recoverer.exited;
    }
  });
});
