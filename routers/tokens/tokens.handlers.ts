import { Unauthorized } from '../../core/errors.js';
import { User } from '../../models/user.js';
import { signToken } from '../auth/jwt.js';
import { verifyPassword } from '../auth/password.js';
import type { CreateTokenInput } from './tokens.schema.js';

// Compared against when the user does not exist, so both paths cost one scrypt.
const DUMMY_SALT = '00000000000000000000000000000000';
const DUMMY_HASH = '0'.repeat(128);

export async function createToken(secret: string, ttlSeconds: number, input: CreateTokenInput) {
  const user = await User.findOne({ where: { tenantId: input.tenantId, username: input.username } });
  const valid = await verifyPassword(
    input.password,
    user?.passwordSalt ?? DUMMY_SALT,
    user?.passwordHash ?? DUMMY_HASH,
  );
  // One message for every failure: which part was wrong is not revealed.
  if (!user?.passwordHash || !valid || user.status !== 'ACTIVE') {
    throw new Unauthorized('Invalid credentials');
  }
  const { token, expiresAt } = signToken(
    secret,
    { userId: String(user.id), tenantId: user.tenantId, role: user.role },
    ttlSeconds,
  );
  return { token, tokenType: 'Bearer' as const, expiresAt: expiresAt.toISOString() };
}
