'use strict';
// Strict per-user caps in O(1) (CONTRACT section 5, issue 10 defect 3):
// - A user has IDEMPOTENCY_MAX_IN_FLIGHT slot rows (created on first use). A claim locks a free one
//   with FOR UPDATE SKIP LOCKED in its transaction: a Mode A request holds it until it commits, a
//   Mode B record holds it while it is PROCESSING (holder = its scope key). However many requests
//   arrive at once on however many instances, at most that many slots are taken.
// - Each slot row counts the records claimed through it (`retained`), decremented by the purge, so
//   the retained cap is a SUM over at most IDEMPOTENCY_MAX_IN_FLIGHT rows, whatever the number of keys.
// Records claimed before this migration are counted on slot 1 of their user, only when the column is
// added: run again later, it would move every record to slot 1 and fail on the slots' primary key.
const up = `
CREATE TABLE IF NOT EXISTS idempotency_slots (
  user_scope VARCHAR(60) NOT NULL,
  slot SMALLINT NOT NULL,
  holder VARCHAR(200),
  retained INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (user_scope, slot)
);
DO $mig$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                 AND table_name = 'idempotency_records' AND column_name = 'slot') THEN
    ALTER TABLE idempotency_records ADD COLUMN slot SMALLINT;
    UPDATE idempotency_records SET slot = 1;
    INSERT INTO idempotency_slots (user_scope, slot, retained)
      SELECT user_scope, 1, count(*) FROM idempotency_records GROUP BY user_scope;
  END IF;
END
$mig$;
`;
const down = `
ALTER TABLE idempotency_records DROP COLUMN IF EXISTS slot;
DROP TABLE IF EXISTS idempotency_slots;
`;
module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
