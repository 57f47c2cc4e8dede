// A COMMIT that PostgreSQL carried out, whose answer never reached the service: a relay between one
// real instance and the server cuts the connection after the server's ReadyForQuery of that round
// trip. Tx 1 (or a resume) then holds the payment under a lease, and the recoverer would charge it
// once the lease ends; until 2026-11-29 the request answered 503 "Database unavailable", which tells
// a client that nothing was done (CONTRACT section 3). Now it looks again: its own record found, it
// charges at once; the database still unreachable, it answers 202.
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { startWireRecorder, type WireRecorder } from '../ha/wire-recorder.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';
import type { HttpResult } from '../support/http.js';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { createOrder } from '../support/orders.js';
import {
  type PaymentRequest,
  pay,
  payNotCharged,
  payUntilFinal,
  shortLeaseEnv,
} from '../support/payment-calls.js';
import { assertPaymentInvariants } from '../support/payment-invariants.js';
import { type Instance, startInstance } from '../support/processes.js';
import { assertRefundInvariants, paidPayment, refund } from '../support/refunds.js';
import { bearer, idempotencyKey, uniqueTenant } from '../support/tokens.js';

/** Tx 1's last round trip: the payment's INSERT, the record's link, COMMIT. */
const TX1_COMMIT = /^\s*INSERT INTO payments[\s\S]*\bCOMMIT;\s*$/;
/** A resume's COMMIT: the transaction took the payment's resumable mark. */
const COMMIT = /^\s*COMMIT;?\s*$/;
const TOOK_RESUMABLE_MARK = /UPDATE payments SET resumable_since = NULL/;

describe('payments and refunds: a COMMIT carried out whose answer was lost with the connection', function () {
  this.timeout(60000);
  let db: IsolatedDatabase;
  let slot: GatewaySlot;
  let relay: WireRecorder;
  let instance: Instance;

  before(async () => {
    db = await createIsolatedDatabase('unacked');
    slot = await startGatewaySlot();
    await slot.simulator();
    const server = new URL(db.url);
    relay = await startWireRecorder({ host: '127.0.0.1', port: Number(server.port || 5432) });
    const through = new URL(db.url);
    through.hostname = '127.0.0.1';
    through.port = String(relay.port);
    through.searchParams.delete('host');
    instance = await startInstance(shortLeaseEnv(through.toString(), slot.url));
  });
  beforeEach(async () => {
    relay.reachable();
    await slot.client.setFaults({});
  });
  after(async () => {
    await instance?.stop();
    await relay?.close();
    await slot?.close();
    await db?.drop();
  });

  async function setup(prefix: string) {
    const tenant = uniqueTenant(prefix);
    const auth = bearer(tenant, '830000001');
    await createOrder(instance.url, auth, 'mo-1', '31.00');
    return { tenant, auth, body: { merchantOrderNo: 'mo-1', amount: '31.00' } };
  }

  async function paymentOf(tenant: string) {
    const rows = await db.sequelize.query<{ paymentNo: string; status: string }>(
      'SELECT payment_no AS "paymentNo", status FROM payments WHERE merchant_id = $1',
      { bind: [tenant], type: QueryTypes.SELECT },
    );
    expect(rows, 'one payment').to.have.length(1);
    return rows[0];
  }

  const chargesOf = async (paymentNo: string) =>
    (await slot.ledger()).charges.filter((c) => c.paymentNo === paymentNo);

  /** A payment answered 503 because the gateway failed with 5xx: nothing charged, resumable. */
  const notCharged = (auth: Record<string, string>, body: PaymentRequest) =>
    payNotCharged(instance.url, slot.client, auth, body);

  /** A payment sent while a cut is armed: its answer, once the relay has cut. */
  async function payAcross(
    cut: Promise<unknown>,
    auth: Record<string, string>,
    key: string,
    body: PaymentRequest,
  ) {
    const res = await pay(instance.url, auth, key, body);
    await cut;
    return res;
  }

  /** Answered as a first execution that charged: 201 SUCCEEDED. */
  function charged(res: HttpResult) {
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data.status).to.equal('SUCCEEDED');
    expect(res.headers.get('idempotent-replayed')).to.equal(null);
  }

  async function endsSucceededOnce(
    tenant: string,
    auth: Record<string, string>,
    key: string,
    body: PaymentRequest,
  ) {
    const { final } = await payUntilFinal(instance.url, auth, key, body);
    expect(final.status, final.text).to.equal(201);
    expect(final.body.data.status).to.equal('SUCCEEDED');
    const payment = await paymentOf(tenant);
    expect(payment.status).to.equal('SUCCEEDED');
    expect(await chargesOf(payment.paymentNo)).to.have.length(1);
    await assertPaymentInvariants(db.sequelize, () => slot.ledger(), tenant, { exclusiveLedger: false });
  }

  it("when Tx 1's COMMIT is carried out and its answer lost, then the request finds its own record and charges: 201 SUCCEEDED, one charge", async () => {
    const { tenant, auth, body } = await setup('unack1');
    const key = idempotencyKey();
    charged(await payAcross(relay.cutAnswerOf(TX1_COMMIT), auth, key, body));
    await endsSucceededOnce(tenant, auth, key, body);
  });

  it("when Tx 1's COMMIT answer is lost and the database stays unreachable, then 202 with Retry-After (never 503); once it is back, the same key gets the payment, charged once", async () => {
    const { tenant, auth, body } = await setup('unack2');
    const key = idempotencyKey();
    const res = await payAcross(relay.cutAnswerOf(TX1_COMMIT, { thenUnreachable: true }), auth, key, body);
    expect(res.status, res.text).to.equal(202);
    expect(res.headers.get('retry-after')).to.match(/^\d+$/);
    relay.reachable();
    await endsSucceededOnce(tenant, auth, key, body);
  });

  it("when a retry with the same key resumes a payment answered 503 and its resume's COMMIT answer is lost, then 202 (never 503), and the payment ends SUCCEEDED with one charge", async () => {
    const { tenant, auth, body } = await setup('unack3');
    const key = await notCharged(auth, body);
    const res = await payAcross(relay.cutAnswerOf(COMMIT, { after: TOOK_RESUMABLE_MARK }), auth, key, body);
    expect(res.status, res.text).to.equal(202);
    await endsSucceededOnce(tenant, auth, key, body);
  });

  it("when a new key resumes a payment answered 503 and its Tx 1's COMMIT answer is lost, then it finds the resume its own and charges: 201 SUCCEEDED, one charge", async () => {
    const { tenant, auth, body } = await setup('unack4');
    await notCharged(auth, body);
    const key = idempotencyKey();
    charged(await payAcross(relay.cutAnswerOf(COMMIT, { after: TOOK_RESUMABLE_MARK }), auth, key, body));
    await endsSucceededOnce(tenant, auth, key, body);
  });

  it("when a refund's Tx 1 COMMIT is carried out and its answer lost, then it finds its own record and refunds: 201 SUCCEEDED, refunded once (the mechanism is the effects', refunds alike)", async () => {
    const tenant = uniqueTenant('unack5');
    const auth = bearer(tenant, '830000001');
    const paid = await paidPayment(instance.url, auth, '40.00');
    const cut = relay.cutAnswerOf(/^\s*INSERT INTO refunds[\s\S]*\bCOMMIT;\s*$/);
    const res = await refund(instance.url, auth, paid.id, idempotencyKey(), { amount: '15.00' });
    await cut;
    expect(res.status, res.text).to.equal(201);
    expect(res.body.data).to.include({ status: 'SUCCEEDED', amount: '15.00' });
    const made = (await slot.ledger()).refunds.filter((r) => r.refundNo === res.body.data.refundNo);
    expect(made.map((r) => r.status)).to.deep.equal(['SUCCEEDED']);
    await assertRefundInvariants(db.sequelize, () => slot.ledger(), tenant, { settled: true });
  });
});
