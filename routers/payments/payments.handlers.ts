import type { Identity } from '../../core/identity.js';
import { Payment } from '../../models/payment.js';
import { toPaymentDto } from '../../payments/payment-reply.js';
import { visibleTo } from '../auth/who.js';
import type { PaymentDto } from './payments.schema.js';

/** Another tenant's payment is 404; the same tenant's payment of another user is 403. */
export async function getPayment(auth: Identity, id: string): Promise<PaymentDto> {
  const payment = await Payment.findOne({ where: { merchantId: auth.tenantId, id } });
  return toPaymentDto(visibleTo(auth, payment, 'payment'));
}
