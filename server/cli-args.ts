import { type ParseArgsConfig, parseArgs } from 'node:util';
import type { z } from 'zod';

export type CliArgs<T> = { ok: true; values: T } | { ok: false; problem: string };

/**
 * Command-line options read by util.parseArgs (strict: an unknown option is refused) and checked by a
 * zod schema. A problem comes back as one line: parseArgs' own message, or `--<option>: <message>`
 * for the first option that fails.
 */
export function readCliArgs<T>(
  options: NonNullable<ParseArgsConfig['options']>,
  schema: z.ZodType<T>,
  args: string[] = process.argv.slice(2),
): CliArgs<T> {
  let values: unknown;
  try {
    values = parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    return { ok: false, problem: err instanceof Error ? err.message : String(err) };
  }
  const parsed = schema.safeParse(values);
  if (parsed.success) return { ok: true, values: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, problem: `--${issue.path.join('.')}: ${issue.message}` };
}
