import type { Identity } from '../../core/identity.js';
import { Payment } from '../../models/payment.js';
import { Refund } from '../../models/refund.js';
import { toRefundDto } from '../../payments/refund-reply.js';
import { visibleTo } from '../auth/who.js';
import type { RefundDto } from './refunds.schema.js';

/** Another tenant's refund is 404; the same tenant's refund of another user's payment is 403. */
export async function getRefund(auth: Identity, id: string): Promise<RefundDto> {
  const refund = await Refund.findOne({ where: { merchantId: auth.tenantId, id } });
  return toRefundDto(visibleTo(auth, refund, 'refund'));
}

/** A payment's refunds, oldest first; the payment's own 404/403 first (as GET /payments/{id}). */
export async function listRefunds(auth: Identity, paymentId: string): Promise<RefundDto[]> {
  const payment = await Payment.findOne({
    where: { merchantId: auth.tenantId, id: paymentId },
    attributes: ['id', 'userId'],
  });
  visibleTo(auth, payment, 'payment');
  const refunds = await Refund.findAll({
    where: { paymentId },
    order: [
      ['createdAt', 'ASC'],
      ['id', 'ASC'],
    ],
  });
  return refunds.map(toRefundDto);
}
