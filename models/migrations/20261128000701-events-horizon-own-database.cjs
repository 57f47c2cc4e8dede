'use strict';
// The feed's horizon counts only transactions that can write this database's events.
//
// The feed shows an event once no transaction that could still commit one before it is open
// (DESIGN "Events: the transactional outbox"; events/feed.ts). That horizon was the snapshot's xmin,
// the oldest transaction still open in the whole PostgreSQL cluster: an outside audit held a
// transaction with an id open in another database of the same server for 5 s, and every event of the
// service waited those 5 s (the contract's subscriber gets an event within 1 s of its commit).
//
// events_horizon() is the oldest transaction still open at the statement's snapshot that is not known
// to run in another database, or the snapshot's xmax when there is none: every id below it has ended
// or belongs to another database, whose transactions cannot write this one's events table, and every
// later transaction gets a larger id. "Known" is pg_stat_activity naming the backend whose
// backend_xid it is, with another database's oid (a backend never changes database; ids are never
// given twice). Anything else counts as this database's and holds the horizon, as before: a prepared
// transaction (not in pg_stat_activity), a session of a role whose backend_xid the service's role may
// not read (pg_read_all_stats lets it), a backend without a database. STABLE, so it reads the calling
// statement's snapshot: the horizon and the events read beside it are of one snapshot. PL/pgSQL, so
// its plan is kept per connection (as a SQL function it was planned at every call: 0.4 ms against
// 0.08). pgbench, one client, 15 backends: 0.087 ms a call with nothing open (xmin alone: 0.076),
// 0.194 ms with a transaction open. Callers take it once a statement: (SELECT events_horizon()).
// Safe to run twice (CREATE OR REPLACE); down() drops it.
const UP = `
CREATE OR REPLACE FUNCTION events_horizon() RETURNS xid8
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  snap pg_snapshot := pg_current_snapshot();
  h xid8;
BEGIN
  -- Nothing open at the snapshot: one comparison.
  IF pg_snapshot_xmin(snap) = pg_snapshot_xmax(snap) THEN
    RETURN pg_snapshot_xmax(snap);
  END IF;
  SELECT min(x) INTO h
    FROM pg_snapshot_xip(snap) AS x
   WHERE NOT EXISTS (
           SELECT 1 FROM pg_stat_activity a
            WHERE a.backend_xid IS NOT NULL
              AND a.backend_xid::text::bigint = x::text::bigint % 4294967296
              AND a.datid IS NOT NULL
              AND a.datid <> (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()));
  RETURN COALESCE(h, pg_snapshot_xmax(snap));
END
$fn$;`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(UP),
  down: (queryInterface) => queryInterface.sequelize.query('DROP FUNCTION IF EXISTS events_horizon()'),
};
