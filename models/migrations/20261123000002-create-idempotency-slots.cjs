'use strict';
// Strict per-user caps in O(1) (CONTRACT section 5, issue 10 defect 3):
// - A user has IDEMPOTENCY_MAX_IN_FLIGHT slot rows (created on first use). A claim locks a free one
//   with FOR UPDATE SKIP LOCKED in its transaction: a Mode A request holds it until it commits, a
//   Mode B record holds it while it is PROCESSING (holder = its scope key). However many requests
//   arrive at once on however many instances, at most that many slots are taken.
// - Each slot row counts the records claimed through it (`retained`), decremented by the purge, so
//   the retained cap is a SUM over at most IDEMPOTENCY_MAX_IN_FLIGHT rows, whatever the number of keys.
// Records claimed before this migration are counted on slot 1 of their user.
const up = `
CREATE TABLE idempotency_slots (
  user_scope VARCHAR(60) NOT NULL,
  slot SMALLINT NOT NULL,
  holder VARCHAR(200),
  retained INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (user_scope, slot)
);
ALTER TABLE idempotency_records ADD COLUMN slot SMALLINT;
UPDATE idempotency_records SET slot = 1;
INSERT INTO idempotency_slots (user_scope, slot, retained)
  SELECT user_scope, 1, count(*) FROM idempotency_records GROUP BY user_scope;
`;
const down = `
ALTER TABLE idempotency_records DROP COLUMN slot;
DROP TABLE idempotency_slots;
`;
module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
