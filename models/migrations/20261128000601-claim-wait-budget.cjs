'use strict';
// A claim that waited leaves the rest of its transaction only the time left of the wait bound
// (CONTRACT section 5: "No request waits longer than IDEMPOTENCY_WAIT_MS for another request's work,
// whatever holds it").
//
// The bound is the transaction's lock_timeout (the claim's round trip sets it to IDEMPOTENCY_WAIT_MS,
// or to what is left of it after a wait in the service). lock_timeout bounds each lock wait on its
// own, so two waits in a row could take twice the bound. That happened to a duplicate of a request
// whose business write was stuck behind a stalled transaction's row lock: the duplicate waited up to
// the bound on the key's advisory lock, which the first request held until its own write gave up
// (503, rolled back); the duplicate then claimed the key, ran the same write and waited a whole bound
// again on the same row (an outside audit measured 1.94 s with a bound of 1 s, on a PATCH of a user
// and on an order create).
//
// Now, when the claim inserted the record, and its round trip had by then taken more than 1 ms, it
// sets lock_timeout for the rest of its transaction (set_config(..., true), as SET LOCAL) to the bound
// less the time since the round trip began (statement_timestamp(): the receipt of the round trip,
// whose statements before the claim take no locks that wait), at least 1 ms. The business write then
// waits at most what is left. A lock_timeout of 0 (no bound: not a setting of the service) is left as
// it is. The 1 ms test keeps the hot path, which does not wait, to one comparison.
//
// The function's text is edited in place, as 20261128000401 does: the current definition
// (pg_get_functiondef, with its SET clause) with the claimed branch's one statement replaced, so
// nothing else in it can drift. Safe to run twice; it fails, naming the function, if neither form is
// there. down() makes the reverse edit.
const SIGNATURE =
  'idem_claim(text, text, text, text, float8, integer, integer, text, text, float8, text, integer, text, text)';
const PLAIN_FORM = `    PERFORM set_config('idem.claimed', p_scope_key, true);
`;
const BUDGET_FORM = `    PERFORM set_config('idem.claimed', p_scope_key, true);
    -- The rest of the transaction waits at most what is left of the bound (migration 20261128000601).
    IF clock_timestamp() - statement_timestamp() > interval '1 millisecond'
       AND current_setting('lock_timeout') <> '0' THEN
      PERFORM set_config('lock_timeout', GREATEST(1, floor(1000 * extract(epoch FROM
        current_setting('lock_timeout')::interval - (clock_timestamp() - statement_timestamp()))))::bigint || 'ms', true);
    END IF;
`;

/** Replaces `from` by `to` in idem_claim's definition; nothing to do when `to` is there already. */
const edit = (from, to) => `
DO $edit$
DECLARE
  def text := pg_get_functiondef('${SIGNATURE}'::regprocedure);
BEGIN
  IF position($to$${to}$to$ IN def) > 0 THEN
    RETURN;
  END IF;
  IF position($from$${from}$from$ IN def) = 0 THEN
    RAISE EXCEPTION 'idem_claim: its claimed branch is not the one this migration edits';
  END IF;
  EXECUTE replace(def, $from$${from}$from$, $to$${to}$to$);
END
$edit$;`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(edit(PLAIN_FORM, BUDGET_FORM)),
  down: (queryInterface) => queryInterface.sequelize.query(edit(BUDGET_FORM, PLAIN_FORM)),
};
