import { z } from 'zod';
import { ConfigError, loadConfig } from '../core/config.js';
import { signToken, tenantIdSchema, userIdSchema } from '../routers/auth/jwt.js';
import { readCliArgs } from './cli-args.js';

// `npm run token -- --tenant T --user U --role admin [--ttl seconds]`: prints a token signed with the
// configured JWT_SECRET (an identity assertion; no user row is needed or created).
const USAGE = 'usage: npm run token -- --tenant <id> --user <decimal id> --role admin|user [--ttl seconds]';

const argsSchema = z.object({
  tenant: tenantIdSchema,
  user: userIdSchema,
  role: z.enum(['admin', 'user']).default('user'),
  ttl: z.coerce
    .number()
    .int()
    .min(1)
    .max(365 * 24 * 3600)
    .optional(),
});

const args = readCliArgs(
  { tenant: { type: 'string' }, user: { type: 'string' }, role: { type: 'string' }, ttl: { type: 'string' } },
  argsSchema,
);
if (!args.ok) {
  console.error(args.problem);
  console.error(USAGE);
  process.exit(2);
}
try {
  const config = loadConfig();
  const { tenant, user, role, ttl } = args.values;
  const { token } = signToken(
    config.JWT_SECRET,
    { tenantId: tenant, userId: user, role },
    ttl ?? config.TOKEN_TTL_SECONDS,
  );
  console.log(token);
} catch (err) {
  console.error(err instanceof ConfigError ? err.message : String(err));
  process.exit(2);
}
