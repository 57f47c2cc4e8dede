'use strict';
// The final state of a Mode A record (idempotency/record-store.ts finishLocal), sent with the COMMIT
// of a keyed create, as a PL/pgSQL function so that its plan is kept per session (the reason is that
// of 20261124000001-hot-path-functions). pg_stat_statements with track_planning: the UPDATE sent as
// text planned in 0.05–0.06 ms and ran in 0.04 ms. The same UPDATE: it touches no indexed column,
// so it stays a HOT update (20261123000004).
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(`
CREATE OR REPLACE FUNCTION idem_finish_local(
  p_scope_key text, p_status text, p_http_status integer, p_response_body text, p_resource_id text)
RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE idempotency_records r
     SET status = p_status, http_status = p_http_status, response_body = p_response_body,
         resource_id = p_resource_id, updated_at = now()
   WHERE r.scope_key = p_scope_key;
END
$fn$;
`),
  down: (queryInterface) =>
    queryInterface.sequelize.query(
      'DROP FUNCTION IF EXISTS idem_finish_local(text, text, integer, text, text);',
    ),
};
