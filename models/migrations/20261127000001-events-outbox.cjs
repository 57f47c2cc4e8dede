'use strict';
// The transactional outbox (issue 28; CONTRACT section 12; DESIGN "Events: the transactional outbox").
//
// Every state change of section 12 writes its event from a trigger on the resource's table, so it is
// written in the transaction of the change on every path there is (the keyless create, the general
// keyed path, idem_execute's one statement, an effect's fenced finalise in SQL) and on none that
// rolled back; a replay or a duplicate changes no row and so writes none.
//
// The row holds the resource's row as it stands after the change (`to_jsonb(NEW)`, numbers as text so
// that an amount keeps its two decimals); the service renders the transfer object from it with the
// same function that renders the API's answers (events/render.ts), so the transfer object is defined
// once, in TypeScript.
//
// Feed order and the out-of-order commit trap: a sequence number is taken at INSERT but transactions
// commit in another order, so a reader that pages by it can pass over an event whose transaction
// commits later. Each event records its transaction id (xid8); the feed is ordered by (tx_id, seq) and
// a reader is shown only events whose tx_id is below its snapshot's xmin: every transaction below it
// has ended, so nothing can later appear before a position already read (events/feed.ts).
//
// The event id is its position, 'evt_<tx_id>_<seq>': stable for ever, and a cursor by itself (a
// subscriber resumes from its last id even after that event was purged).
//
// Webhook deliveries are fanned out here too, in the same transaction: each ENABLED endpoint of the
// tenant whose types match gets a PENDING delivery (CONTRACT: "every endpoint that existed and matched
// when the event was written"). With no endpoint it is one index probe.
const up = `
CREATE TABLE IF NOT EXISTS events (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tx_id xid8 NOT NULL,
  tenant_id VARCHAR(36) NOT NULL,
  user_id BIGINT,
  type VARCHAR(40) NOT NULL,
  resource_id TEXT NOT NULL,
  row JSONB NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS events_tenant_feed ON events (tenant_id, tx_id, seq);
CREATE INDEX IF NOT EXISTS events_feed ON events (tx_id, seq);
CREATE INDEX IF NOT EXISTS events_created_at ON events (created_at);

CREATE TABLE IF NOT EXISTS webhook_endpoints (
  id VARCHAR(64) PRIMARY KEY,
  tenant_id VARCHAR(36) NOT NULL,
  url VARCHAR(2048) NOT NULL,
  types TEXT[],
  secret_ciphertext TEXT NOT NULL,
  status VARCHAR(12) NOT NULL DEFAULT 'ENABLED' CHECK (status IN ('ENABLED', 'DELETED')),
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  deleted_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_tenant ON webhook_endpoints (tenant_id) WHERE status = 'ENABLED';

CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id BIGSERIAL PRIMARY KEY,
  endpoint_id VARCHAR(64) NOT NULL REFERENCES webhook_endpoints (id),
  event_id TEXT NOT NULL,
  tenant_id VARCHAR(36) NOT NULL,
  type VARCHAR(40) NOT NULL,
  status VARCHAR(12) NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_status_code INTEGER,
  last_error VARCHAR(500),
  next_attempt_at TIMESTAMPTZ DEFAULT now(),
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (endpoint_id, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX IF NOT EXISTS webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);

-- Where a relay (the NATS publisher) has got to in the feed.
CREATE TABLE IF NOT EXISTS event_relays (
  name VARCHAR(40) PRIMARY KEY,
  tx_id xid8 NOT NULL DEFAULT '0'::xid8,
  seq BIGINT NOT NULL DEFAULT 0,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A row as JSON with every number as its text, so that numeric(14,2) keeps "10.50" and a bigint
-- keeps all its digits.
CREATE OR REPLACE FUNCTION event_row(p_row jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT coalesce(jsonb_object_agg(k, CASE WHEN jsonb_typeof(v) = 'number' THEN to_jsonb(v #>> '{}') ELSE v END), '{}'::jsonb)
  FROM jsonb_each(p_row) AS e(k, v)
$fn$;

-- Writes one event (and its webhook deliveries) in the calling transaction.
CREATE OR REPLACE FUNCTION event_emit(p_tenant text, p_user bigint, p_type text, p_resource text, p_row jsonb)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  v_seq bigint := nextval(pg_get_serial_sequence('events', 'seq'));
  v_tx xid8 := pg_current_xact_id();
  v_id text := 'evt_' || v_tx::text || '_' || v_seq::text;
BEGIN
  INSERT INTO events (seq, id, tx_id, tenant_id, user_id, type, resource_id, row)
  VALUES (v_seq, v_id, v_tx, p_tenant, p_user, p_type, p_resource, event_row(p_row));
  INSERT INTO webhook_deliveries (endpoint_id, event_id, tenant_id, type)
  SELECT e.id, v_id, p_tenant, p_type FROM webhook_endpoints e
   WHERE e.tenant_id = p_tenant AND e.status = 'ENABLED' AND (e.types IS NULL OR p_type = ANY (e.types));
END
$fn$;

-- orders: order.created on INSERT, order.paid when its status becomes PAID.
CREATE OR REPLACE FUNCTION orders_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM event_emit(NEW.tenant_id, NEW.user_id, 'order.created', NEW.id::text, to_jsonb(NEW));
  ELSIF NEW.status = 'PAID' AND OLD.status IS DISTINCT FROM 'PAID' THEN
    PERFORM event_emit(NEW.tenant_id, NEW.user_id, 'order.paid', NEW.id::text, to_jsonb(NEW));
  END IF;
  RETURN NULL;
END
$fn$;
DROP TRIGGER IF EXISTS orders_event ON orders;
CREATE TRIGGER orders_event AFTER INSERT OR UPDATE OF status ON orders
  FOR EACH ROW EXECUTE FUNCTION orders_event();

-- payments: payment.succeeded / payment.failed when it becomes final (at INSERT or later).
CREATE OR REPLACE FUNCTION payments_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.status IN ('SUCCEEDED', 'FAILED')
     AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status) THEN
    PERFORM event_emit(NEW.merchant_id, NEW.user_id, 'payment.' || lower(NEW.status), NEW.id, to_jsonb(NEW));
  END IF;
  RETURN NULL;
END
$fn$;
DROP TRIGGER IF EXISTS payments_event ON payments;
CREATE TRIGGER payments_event AFTER INSERT OR UPDATE OF status ON payments
  FOR EACH ROW EXECUTE FUNCTION payments_event();
`;

const down = `
DROP TRIGGER IF EXISTS payments_event ON payments;
DROP TRIGGER IF EXISTS orders_event ON orders;
DROP FUNCTION IF EXISTS payments_event();
DROP FUNCTION IF EXISTS orders_event();
DROP FUNCTION IF EXISTS event_emit(text, bigint, text, text, jsonb);
DROP FUNCTION IF EXISTS event_row(jsonb);
DROP TABLE IF EXISTS event_relays;
DROP TABLE IF EXISTS webhook_deliveries;
DROP TABLE IF EXISTS webhook_endpoints;
DROP TABLE IF EXISTS events;
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
