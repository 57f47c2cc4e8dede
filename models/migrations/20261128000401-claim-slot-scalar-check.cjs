'use strict';
// idem_claim's free-slot test reads the holder's record by its primary key, also when the claim was
// planned on a new database.
//
// A slot is free when it has no holder, or when its holder's record is visibly no longer PROCESSING.
// That second test was `EXISTS (SELECT 1 FROM idempotency_records h WHERE h.scope_key = s.holder AND
// h.status <> 'PROCESSING')`. Under an OR, PostgreSQL may run such an EXISTS as a hashed SubPlan: it
// reads every record that is not PROCESSING into a hash table, then probes it. It chose that plan
// whenever idempotency_records looked small, as it does on a new database. Since 20261128000201,
// idem_claim keeps one generic plan per connection (plan_cache_mode = force_generic_plan). A
// connection that made its first claim on a new database then kept that plan until an ANALYZE of the
// table. Meanwhile each claim by a user with a payment or refund in flight (a held slot) read the
// whole table. test/idempotency/claim-slot-plan.test.ts shows the sequential scan this caused.
//
// The test is now a scalar subquery:
//   COALESCE((SELECT h.status <> 'PROCESSING' FROM idempotency_records h WHERE h.scope_key = s.holder), false)
// A scalar subquery is never hashed: on a table never ANALYZEd it is the primary-key lookup, and it
// is true, false or missing (busy) exactly when the EXISTS was. (On tables ANALYZEd while empty, every
// generic plan of these functions scans instead; 20261128000501 keeps them to their indexes.)
//
// The function's text is edited in place: the current definition (pg_get_functiondef, with its SET
// clause) with the one condition replaced, so nothing else in it can drift. Safe to run twice (an
// edited body is left as it is); it fails, naming the function, if neither form is there. down()
// makes the reverse edit.
const SIGNATURE =
  'idem_claim(text, text, text, text, float8, integer, integer, text, text, float8, text, integer, text, text)';
const EXISTS_FORM = `(s.holder IS NULL OR EXISTS (
          SELECT 1 FROM idempotency_records h WHERE h.scope_key = s.holder AND h.status <> 'PROCESSING'))`;
const SCALAR_FORM = `(s.holder IS NULL OR COALESCE((
          SELECT h.status <> 'PROCESSING' FROM idempotency_records h WHERE h.scope_key = s.holder), false))`;

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
    RAISE EXCEPTION 'idem_claim: its free-slot condition is not the one this migration edits';
  END IF;
  EXECUTE replace(def, $from$${from}$from$, $to$${to}$to$);
END
$edit$;`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(edit(EXISTS_FORM, SCALAR_FORM)),
  down: (queryInterface) => queryInterface.sequelize.query(edit(SCALAR_FORM, EXISTS_FORM)),
};
