import type { Sequelize } from 'sequelize';
import { type ResumableReading, resumableReading } from '../idempotency/effect-recover.js';
import { paymentEffect } from './payment-effect.js';

export type { ResumableReading };

/** The resumable payments (CONTRACT section 3), from their partial index. */
export const resumablePayments = (sequelize: Sequelize) => resumableReading({ sequelize }, paymentEffect);
