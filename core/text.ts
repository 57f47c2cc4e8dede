import { z } from 'zod';

// With the u flag a surrogate pair is one code point, so this matches only an unpaired half.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * A string field of an input: any text but a lone UTF-16 surrogate ("\ud800" in JSON) or NUL.
 * PostgreSQL stores a lone surrogate as U+FFFD, so the answer of a keyed create (built from the input
 * before its write) would differ from the row GET reads back (issue 26, defect 2); and it cannot hold
 * NUL in text at all (the statement fails: a webhook endpoint's id with "\u0000" over tRPC was a 500).
 * Fields with an ASCII pattern (ids, usernames, merchantOrderNo, currency, tenant) refuse both by
 * their pattern already.
 */
export function text() {
  return z
    .string()
    .refine((s) => !LONE_SURROGATE.test(s), 'must not contain a lone UTF-16 surrogate')
    .refine((s) => !s.includes('\0'), 'must not contain NUL characters');
}
