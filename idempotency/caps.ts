/**
 * The per-user caps of CONTRACT section 5 as SQL, written once for every statement that checks them
 * (the Mode A claim, the Mode B claim, and the lookup of which cap refused). Each count stops at its
 * cap (LIMIT), so a user with many records costs no more than the cap to check. Arguments are SQL
 * expressions: bound parameters or escaped literals.
 */
export const inFlightCount = (userScope: string, maxInFlight: string) =>
  `(SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = ${userScope} AND status = 'PROCESSING'
        LIMIT ${maxInFlight}) p)`;

export const retainedCount = (userScope: string, maxRetained: string) =>
  `(SELECT count(*) FROM (SELECT 1 FROM idempotency_records WHERE user_scope = ${userScope} AND expires_at > now()
        LIMIT ${maxRetained}) r)`;

/** True while the user is under both caps: the condition of the claim's INSERT ... SELECT. */
export const withinCaps = (userScope: string, maxRetained: string, maxInFlight: string) =>
  `${retainedCount(userScope, maxRetained)} < ${maxRetained}
  AND ${inFlightCount(userScope, maxInFlight)} < ${maxInFlight}`;
