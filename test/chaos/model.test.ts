import { expect } from 'chai';
import fc from 'fast-check';
import { setFailpoints } from '../../core/failpoints.js';
import { purgeExpired } from '../../idempotency/purge-expired.js';
import { type HttpResult, http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/**
 * Model-based test of the idempotency record's state machine and of one payment's, against the real
 * engine and the real database (the in-process server, its bundled gateway simulator), with faults
 * as commands: a transient error before the commit (a failpoint), a record's expiry and purge, the
 * gateway answering 5xx, a payment's executor failing after the gateway charged (Mode B failpoints
 * after the charge and before Tx 2) and the end of its lease. fast-check runs random command
 * sequences and, on a failure, shrinks it to the shortest sequence that still fails.
 */

type Variant = 'A' | 'B';
const ORDER_BODIES: Record<Variant, { merchantOrderNo: string; amount: string }> = {
  A: { merchantOrderNo: 'o-a', amount: '1.00' },
  B: { merchantOrderNo: 'o-b', amount: '2.00' },
};
const PAYMENT_BODY = { merchantOrderNo: 'mo-pay', amount: '10.00' };

/** Mode B failpoints that fail an executor after the gateway charged: the payment is left PROCESSING. */
type PaymentFault = 'payment.charge.after' | 'payment.tx2.before';

interface Model {
  /** Order keys: the body first sent and the answer stored for it. */
  orderKeys: Map<number, { variant: Variant; status: number; body: unknown }>;
  ordersCreated: Set<string>;
  /** Order keys whose record was purged: refused 40905 from then on (a tombstone). */
  deadOrderKeys: Set<number>;
  transientArmed: boolean;
  /** Armed only with the gateway up: the next Pay that executes (new, resumed) is charged, then fails. */
  paymentArmed: PaymentFault | null;
  /**
   * stuck: charged at the gateway, PROCESSING under the failed executor's live lease (held by the
   * record of key `holder`); expired: the same once that lease ended (a takeover may finish it).
   */
  payment: 'none' | 'resumable' | 'succeeded' | 'stuck' | 'expired';
  holder: number | null;
  paymentBody: unknown;
  /** Payment keys whose stored answer is final (a 503 stores nothing final). */
  payKeys: Map<number, unknown>;
  gatewayDown: boolean;
}

interface Real {
  tenant: string;
  auth: Record<string, string>;
  orderKeys: string[];
  payKeys: string[];
}

const post = (real: Real, path: string, key: string, body: object): Promise<HttpResult> =>
  http('POST', path, { headers: { ...real.auth, 'Idempotency-Key': key }, body });

async function gateway() {
  return (await sharedServer()).services.payments.gateway;
}

class CreateOrder implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly k: number,
    readonly v: Variant,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const res = await post(r, '/api/v1/orders', r.orderKeys[this.k], ORDER_BODIES[this.v]);
    if (m.deadOrderKeys.has(this.k)) {
      expect(res.status, res.text).to.equal(409);
      expect(res.body.code).to.equal(40905);
      return;
    }
    const known = m.orderKeys.get(this.k);
    if (known && known.variant !== this.v) {
      expect(res.status, res.text).to.equal(409);
      expect(res.body.code).to.equal(40901);
      return;
    }
    if (known) {
      expect(res.status, res.text).to.equal(known.status);
      expect(res.body).to.deep.equal(known.body);
      expect(res.headers.get('idempotent-replayed')).to.equal('true');
      return;
    }
    if (m.transientArmed) {
      // A new key reaches the commit: the injected transient error rolls everything back.
      m.transientArmed = false;
      expect(res.status, res.text).to.equal(503);
      expect(res.headers.get('retry-after')).to.not.equal(null);
      return;
    }
    const merchantOrderNo = ORDER_BODIES[this.v].merchantOrderNo;
    if (m.ordersCreated.has(merchantOrderNo)) {
      expect(res.status, res.text).to.equal(409);
      expect(res.body.code).to.equal(40904);
    } else {
      expect(res.status, res.text).to.equal(201);
      m.ordersCreated.add(merchantOrderNo);
    }
    m.orderKeys.set(this.k, { variant: this.v, status: res.status, body: res.body });
  }
  toString = () => `CreateOrder(k${this.k}, ${this.v})`;
}

class ArmTransientError implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => !m.transientArmed && !m.paymentArmed;
  async run(m: Model) {
    setFailpoints('local.before-commit=throw@1');
    m.transientArmed = true;
  }
  toString = () => 'ArmTransientError';
}

class ExpireAndPurge implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  check = (m: Readonly<Model>) => m.orderKeys.has(this.k);
  async run(m: Model, r: Real) {
    const { sequelize } = (await sharedServer()).services;
    await sequelize.query(
      `UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE scope_key LIKE $1`,
      { bind: [`${r.tenant}:%:orders.create:${r.orderKeys[this.k]}`] },
    );
    await purgeExpired(sequelize);
    // The key is dead (its tombstone refuses it, whatever the body); the order stays.
    m.orderKeys.delete(this.k);
    m.deadOrderKeys.add(this.k);
  }
  toString = () => `ExpireAndPurge(k${this.k})`;
}

class Pay implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  // The stuck payment's own key would wait IDEMPOTENCY_WAIT_MS for its live lease (then 202): left
  // out to keep the run fast; every other key is answered at once.
  check = (m: Readonly<Model>) => !(m.payment === 'stuck' && m.holder === this.k);
  async run(m: Model, r: Real) {
    const res = await post(r, '/api/v1/payments', r.payKeys[this.k], PAYMENT_BODY);
    const stored = m.payKeys.get(this.k);
    if (stored !== undefined) {
      expect(res.status, res.text).to.equal(201);
      expect(res.body).to.deep.equal(stored);
      return;
    }
    if (m.payment === 'succeeded') {
      // Any key for a paid order: the payment, as a replay, never a second charge.
      expect(res.status, res.text).to.equal(201);
      expect(res.body).to.deep.equal(m.paymentBody);
      m.payKeys.set(this.k, res.body);
      return;
    }
    if (m.payment === 'stuck' || (m.payment === 'expired' && m.holder !== this.k)) {
      // Another key while an executor owns the payment (or its lease ended and only its own key or
      // the recoverer takes it over): 202 with Retry-After, nothing kept for this key.
      expect(res.status, res.text).to.equal(202);
      expect(res.headers.get('retry-after')).to.not.equal(null);
      return;
    }
    if (m.payment === 'expired') {
      // Its own key takes the ended lease over, asks the gateway first, finds the charge: final.
      expect(res.status, res.text).to.equal(201);
      expect(res.body.data.status).to.equal('SUCCEEDED');
      m.payment = 'succeeded';
      m.holder = null;
      m.paymentBody = res.body;
      m.payKeys.set(this.k, res.body);
      return;
    }
    if (m.gatewayDown) {
      expect(res.status, res.text).to.equal(503);
      m.payment = 'resumable';
      return;
    }
    if (m.paymentArmed) {
      // Charged at the gateway, then the executor failed (a transient error, the lease still held):
      // 202 with Location, never 503, which would say that nothing was charged (CONTRACT section 3).
      expect(res.status, res.text).to.equal(202);
      expect(res.headers.get('retry-after')).to.not.equal(null);
      expect(res.headers.get('location')).to.match(/^\/api\/v1\/payments\/pay_/);
      m.paymentArmed = null;
      m.payment = 'stuck';
      m.holder = this.k;
      return;
    }
    // First success, or the resume of a resumable payment by this key (same or new).
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data.status).to.equal('SUCCEEDED');
    m.payment = 'succeeded';
    m.paymentBody = res.body;
    m.payKeys.set(this.k, res.body);
  }
  toString = () => `Pay(k${this.k})`;
}

class ArmPaymentFault implements fc.AsyncCommand<Model, Real> {
  constructor(readonly point: PaymentFault) {}
  check = (m: Readonly<Model>) =>
    !m.transientArmed &&
    !m.paymentArmed &&
    !m.gatewayDown &&
    (m.payment === 'none' || m.payment === 'resumable');
  async run(m: Model) {
    setFailpoints(`${this.point}=throw@1`);
    m.paymentArmed = this.point;
  }
  toString = () => `ArmPaymentFault(${this.point})`;
}

class ExpireLease implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => m.payment === 'stuck';
  async run(m: Model, r: Real) {
    const { sequelize } = (await sharedServer()).services;
    await sequelize.query(
      `UPDATE idempotency_records SET lease_until = now() - interval '1 second'
       WHERE scope_key LIKE $1 AND status = 'PROCESSING'`,
      { bind: [`${r.tenant}:%:payments.create:%`] },
    );
    m.payment = 'expired';
  }
  toString = () => 'ExpireLease';
}

class GatewayOutage implements fc.AsyncCommand<Model, Real> {
  constructor(readonly down: boolean) {}
  check = (m: Readonly<Model>) => m.gatewayDown !== this.down && !m.paymentArmed;
  async run(m: Model) {
    await (await gateway()).setFaults(this.down ? { errorRate: 1 } : {});
    m.gatewayDown = this.down;
  }
  toString = () => `GatewayOutage(${this.down ? 'on' : 'off'})`;
}

const commands = [
  fc
    .tuple(fc.integer({ min: 0, max: 2 }), fc.constantFrom<Variant>('A', 'B'))
    .map(([k, v]) => new CreateOrder(k, v)),
  fc.constant(new ArmTransientError()),
  fc.integer({ min: 0, max: 2 }).map((k) => new ExpireAndPurge(k)),
  fc.integer({ min: 0, max: 2 }).map((k) => new Pay(k)),
  fc.boolean().map((down) => new GatewayOutage(down)),
  fc
    .constantFrom<PaymentFault>('payment.charge.after', 'payment.tx2.before')
    .map((point) => new ArmPaymentFault(point)),
  fc.constant(new ExpireLease()),
];

describe('model-based (fast-check): the record and payment state machines against the real engine', function () {
  this.timeout(180000);

  it('when random sequences of creates, replays, mismatches, transient errors, purges, payments, gateway outages, executors failing after the charge and ended leases run, then every answer is the one the model allows and the order is charged at most once', async () => {
    const server = await sharedServer();
    const gw = server.services.payments.gateway;
    try {
      await fc.assert(
        fc.asyncProperty(fc.commands(commands, { maxCommands: 20, size: 'max' }), async (cmds) => {
          const tenant = uniqueTenant('model');
          const auth = bearer(tenant, '890000001');
          const order = await post(
            { tenant, auth, orderKeys: [], payKeys: [] },
            '/api/v1/orders',
            idempotencyKey(),
            PAYMENT_BODY,
          );
          expect(order.status).to.equal(201);
          const real: Real = {
            tenant,
            auth,
            orderKeys: [0, 1, 2].map(() => idempotencyKey()),
            payKeys: [0, 1, 2].map(() => idempotencyKey()),
          };
          const model: Model = {
            orderKeys: new Map(),
            ordersCreated: new Set(),
            deadOrderKeys: new Set(),
            transientArmed: false,
            paymentArmed: null,
            payment: 'none',
            holder: null,
            paymentBody: undefined,
            payKeys: new Map(),
            gatewayDown: false,
          };
          try {
            await fc.asyncModelRun(() => ({ model, real }), cmds);
            // Whatever state the payment was left in: never two charges, and SUCCEEDED has its one.
            const { sequelize } = server.services;
            const [rows] = (await sequelize.query(
              'SELECT payment_no AS "paymentNo", status FROM payments WHERE merchant_id = $1',
              { bind: [tenant] },
            )) as [Array<{ paymentNo: string; status: string }>, unknown];
            const ledger = await gw.ledger();
            for (const p of rows) {
              const charges = ledger.charges.filter((c) => c.paymentNo === p.paymentNo);
              expect(charges.length, `${p.paymentNo} (${p.status})`).to.be.at.most(1);
              if (p.status === 'SUCCEEDED') expect(charges).to.have.length(1);
            }
            const paymentNo = (model.paymentBody as { data?: { paymentNo?: string } } | undefined)?.data
              ?.paymentNo;
            if (paymentNo) expect(rows.map((p) => p.paymentNo)).to.deep.equal([paymentNo]);
          } finally {
            setFailpoints('');
            await gw.setFaults({});
          }
        }),
        { numRuns: 200, seed: 20261123 },
      );
    } finally {
      setFailpoints('');
      await gw.setFaults({});
    }
  });
});
