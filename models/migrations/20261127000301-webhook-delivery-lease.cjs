'use strict';
// Webhook deliveries (issue 28, CONTRACT section 12): one attempt of a delivery on one instance at a
// time. The dispatcher claims a due delivery by writing a fresh owner token and the lease's end; it
// also moves next_attempt_at to the lease's end, so a delivery whose attempt never reported back (its
// instance died) is simply due again then, found by the same index as any other due delivery. The
// attempt's result is written only where the token is still the one it claimed with (fenced): an
// attempt whose lease was taken over writes nothing.
const up = `
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS lease_owner UUID;
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS lease_until TIMESTAMPTZ;
`;

const down = `
ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS lease_until;
ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS lease_owner;
`;

module.exports = {
  up: (queryInterface) => queryInterface.sequelize.query(up),
  down: (queryInterface) => queryInterface.sequelize.query(down),
};
