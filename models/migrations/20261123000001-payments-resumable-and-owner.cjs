'use strict';
// CONTRACT section 3, amended:
// - A payment whose last attempt certainly charged nothing is resumable: `resumable_since` marks it,
//   and exactly one resumer clears it (a conditional update) before charging again with the same
//   paymentNo. Payments stranded before this column existed (PROCESSING, no PROCESSING record left:
//   their records are FAILED_RETRYABLE or were purged) are marked resumable here.
// - A payment belongs to its order's owner: user_id is the order's user, also for payments an admin
//   made before this migration.
// The fixes of existing rows run only when the column is added: run again later, the second UPDATE
// would mark as resumable a payment that is in flight at that moment between its two transactions.
const up = `
DO $mig$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                 AND table_name = 'payments' AND column_name = 'resumable_since') THEN
    ALTER TABLE payments ADD COLUMN resumable_since TIMESTAMPTZ;
    UPDATE payments p SET user_id = o.user_id FROM orders o WHERE o.id = p.order_id AND p.user_id <> o.user_id;
    UPDATE payments p SET resumable_since = p.updated_at
     WHERE p.status = 'PROCESSING'
       AND NOT EXISTS (SELECT 1 FROM idempotency_records r WHERE r.resource_id = p.id AND r.status = 'PROCESSING');
  END IF;
END
$mig$;
CREATE INDEX IF NOT EXISTS payments_resumable_idx ON payments (resumable_since) WHERE resumable_since IS NOT NULL;
`;
const down = `
DROP INDEX IF EXISTS payments_resumable_idx;
ALTER TABLE payments DROP COLUMN IF EXISTS resumable_since;
`;
module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
