// Mocha root hooks: filled in by the database setup (starts or connects to PostgreSQL once).
export const mochaHooks = {};
