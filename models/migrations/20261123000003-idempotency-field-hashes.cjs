'use strict';
// A 409 40901 names the top-level body fields that differ from the first request (issue 14): each
// record keeps one HMAC per normalised field (under the fingerprint key), never the plaintext body.
// Records written before have none; their 409 names no field.
module.exports = {
  up: (queryInterface) =>
    queryInterface.sequelize.query(
      'ALTER TABLE idempotency_records ADD COLUMN IF NOT EXISTS field_hashes TEXT',
    ),
  down: (queryInterface) =>
    queryInterface.sequelize.query('ALTER TABLE idempotency_records DROP COLUMN IF EXISTS field_hashes'),
};
