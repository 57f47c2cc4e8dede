import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ConfigError, loadConfig } from '../core/config.js';
import { signToken, tenantIdSchema, userIdSchema } from '../routers/auth/jwt.js';

// `npm run token -- --tenant T --user U --role admin [--ttl seconds]`: prints a token signed with the
// configured JWT_SECRET (an identity assertion; no user row is needed or created).
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

try {
  const { values } = parseArgs({
    options: {
      tenant: { type: 'string' },
      user: { type: 'string' },
      role: { type: 'string' },
      ttl: { type: 'string' },
    },
    strict: true,
  });
  const parsed = argsSchema.safeParse(values);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    console.error(`--${issue.path.join('.')}: ${issue.message}`);
    console.error(
      'usage: npm run token -- --tenant <id> --user <decimal id> --role admin|user [--ttl seconds]',
    );
    process.exit(2);
  }
  const config = loadConfig();
  const { token } = signToken(
    config.JWT_SECRET,
    { tenantId: parsed.data.tenant, userId: parsed.data.user, role: parsed.data.role },
    parsed.data.ttl ?? config.TOKEN_TTL_SECONDS,
  );
  console.log(token);
} catch (err) {
  console.error(err instanceof ConfigError || err instanceof TypeError ? err.message : String(err));
  process.exit(2);
}
