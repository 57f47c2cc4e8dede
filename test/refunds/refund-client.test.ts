// The shipped clients (client/) cover refunds: typed on both transports, one key per call, retried
// through a gateway outage (503s) to the final refund, refunded once.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { createServiceClient, newIdempotencyKey } from '../../client/index.js';
import type { RefundDto } from '../../payments/refund.schema.js';
import { paidPayment } from '../support/refunds.js';
import { sharedServer } from '../support/server.js';
import { bearer, tokenFor, uniqueTenant } from '../support/tokens.js';

describe('typed clients (client/): refunds on both transports', function () {
  this.timeout(60000);
  afterEach(async () => (await sharedServer()).services.payments.gateway.setFaults({}));

  for (const transport of ['trpc', 'rest'] as const) {
    it(`(${transport}) when the gateway answers 5xx for a while, then the refund call retries with its one key and ends SUCCEEDED, refunded once`, async () => {
      const { url, services } = await sharedServer();
      const tenant = uniqueTenant(`rcl-${transport}`);
      const user = '850000001';
      const payment = await paidPayment(undefined, bearer(tenant, user), '20.00');
      const seen: Array<{ key: string | null; status: number }> = [];
      const { trpc, rest } = createServiceClient({
        url,
        token: tokenFor(tenant, user),
        retry: { deadlineMs: 30000, baseDelayMs: 100, onAttempt: (a) => void seen.push(a) },
      });
      await services.payments.gateway.setFaults({ errorRate: 1 });
      const refunding =
        transport === 'trpc'
          ? trpc.refunds.create.mutate({ id: payment.id, amount: '7.5', reason: 'late' }).then((r) => r.data)
          : rest
              .POST('/api/v1/payments/{id}/refunds', {
                params: { path: { id: payment.id }, header: { 'Idempotency-Key': newIdempotencyKey() } },
                body: { amount: '7.5', reason: 'late' },
              })
              .then(({ data, error }) => {
                expect(error, JSON.stringify(error)).to.equal(undefined);
                return data?.data;
              });
      while (!seen.some((a) => a.status === 503)) await sleep(50);
      await services.payments.gateway.setFaults({});
      const refund = (await refunding) as RefundDto;
      expect(refund).to.include({
        paymentId: payment.id,
        amount: '7.50',
        reason: 'late',
        status: 'SUCCEEDED',
      });
      expect(new Set(seen.map((a) => a.key)).size, 'one key on every attempt').to.equal(1);
      const ledger = await services.payments.gateway.ledger();
      expect(ledger.refunds.filter((r) => r.refundNo === refund.refundNo)).to.have.length(1);
      const records = await services.sequelize.query(
        `SELECT 1 FROM idempotency_records WHERE user_scope = $1 AND operation = 'refunds.create'`,
        { bind: [`${tenant}:${user}`], type: QueryTypes.SELECT },
      );
      expect(records).to.have.length(1);
      const listed = await trpc.refunds.list.query({ id: payment.id });
      expect(listed.data.map((r) => r.id)).to.deep.equal([refund.id]);
    });
  }
});
