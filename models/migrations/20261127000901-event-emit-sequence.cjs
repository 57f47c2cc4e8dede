'use strict';
// event_emit takes the next feed position from its sequence named once, at migration time, instead of
// calling pg_get_serial_sequence('events', 'seq') on every event: that lookup (the table's name
// parsed, pg_depend searched) cost about 5 µs an event against 0.5 µs for nextval on a regclass
// constant (200,000 calls in a loop, PostgreSQL 15), on every state change's transaction.
// The body is otherwise the one of 20261127000701. CREATE OR REPLACE with an unchanged signature: safe
// to run twice. down() runs 20261127000701's up() again, which puts its body back.
const up = `
DO $do$
BEGIN
  EXECUTE format($f$
CREATE OR REPLACE FUNCTION event_emit(p_tenant text, p_user bigint, p_type text, p_resource text, p_row jsonb)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  v_seq bigint := nextval(%L::regclass);
  v_tx xid8 := pg_current_xact_id();
  v_id text := 'evt_' || v_tx::text || '_' || v_seq::text;
BEGIN
  INSERT INTO events (seq, id, tx_id, tenant_id, user_id, type, resource_id, row)
  VALUES (v_seq, v_id, v_tx, p_tenant, p_user, p_type, p_resource, p_row);
  INSERT INTO webhook_deliveries (endpoint_id, event_id, tenant_id, type)
  SELECT e.id, v_id, p_tenant, p_type FROM webhook_endpoints e
   WHERE e.tenant_id = p_tenant AND e.status = 'ENABLED' AND (e.types IS NULL OR p_type = ANY (e.types));
END
$fn$;$f$, pg_get_serial_sequence('events', 'seq'));
END
$do$;
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => require('./20261127000701-events-cheaper-rows.cjs').up(queryInterface),
};
