// idem_claim's "key busy" marker (issue 26, defect 1; migration 20261126000001) on both of the claim's
// waits: the key's advisory lock (a duplicate's claim holds it to its commit), and the record's INSERT
// when the key's record exists and a transaction is updating it (its request finishing: the unique
// check waits for that transaction). Without the marker the end of either wait reads as the business
// statement's error (idempotency/at-once.ts businessStatementError), not as "in flight".
import { expect } from 'chai';
import type pg from 'pg';
import { idempotencyKey } from '../support/tokens.js';
import { holdingTransaction, orderScope, tenantWithKeyedOrder } from './support.js';

const USER = '850000077';
const CLAIM = `SELECT * FROM idem_claim($1, 'h', $2, 'orders.create', 3600, 20, 10000, NULL, NULL, NULL)`;

/** A tenant whose user has slot rows (a keyed create made them) and one SUCCEEDED record: its scope. */
const tenantWithRecord = () => tenantWithKeyedOrder(USER, 'cw');

/**
 * The claim of `scope` while another transaction holds what `hold` takes, its wait bounded by
 * lock_timeout: the error it ends with (null if it did not wait).
 */
async function claimWhileHeld(
  tenant: string,
  scope: string,
  hold: (holder: pg.Client) => Promise<unknown>,
): Promise<{ code?: string; hint?: string } | null> {
  return holdingTransaction(async (holder) => {
    await hold(holder);
    return holdingTransaction(async (claimant) => {
      await claimant.query(`SET LOCAL lock_timeout = '20ms'`);
      return claimant.query(CLAIM, [scope, `${tenant}:${USER}`]).then(
        () => null,
        (e: { code?: string; hint?: string }) => e,
      );
    });
  });
}

describe("idem_claim: the busy marker on the claim's waits", () => {
  it("when the claim waits out lock_timeout on the key's advisory lock, then 55P03 with HINT 'idem_claim: key busy'", async () => {
    const { tenant } = await tenantWithRecord();
    const scope = orderScope(tenant, USER, idempotencyKey());
    const err = await claimWhileHeld(tenant, scope, (holder) =>
      holder.query('SELECT pg_advisory_xact_lock(7648, hashtext($1))', [scope]),
    );
    expect(err?.code).to.equal('55P03');
    expect(err?.hint).to.equal('idem_claim: key busy');
  });

  it("when the claim's INSERT waits out lock_timeout on the key's record being updated (its request finishing), then 55P03 with HINT 'idem_claim: key busy'", async () => {
    const { tenant, scope } = await tenantWithRecord();
    const err = await claimWhileHeld(tenant, scope, (holder) =>
      holder.query('UPDATE idempotency_records SET expires_at = expires_at WHERE scope_key = $1', [scope]),
    );
    expect(err?.code).to.equal('55P03');
    expect(err?.hint).to.equal('idem_claim: key busy');
  });
});
