import { z } from 'zod';
import { envelopeOf, isoDate } from '../../core/envelope.js';
import { text } from '../../core/text.js';
import { tenantIdSchema } from '../auth/jwt.js';

export const createTokenInput = z.strictObject({
  tenantId: tenantIdSchema,
  username: text().min(1).max(50),
  password: text().min(1).max(128),
});
export type CreateTokenInput = z.infer<typeof createTokenInput>;

export const tokenEnvelope = envelopeOf(
  z.object({ token: z.string(), tokenType: z.literal('Bearer'), expiresAt: isoDate }),
);
