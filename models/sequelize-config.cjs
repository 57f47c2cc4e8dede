// For sequelize-cli only (the service itself reads server/config.ts).
const url = process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:54329/app';
module.exports = {
  development: { url, dialect: 'postgres' },
  test: { url, dialect: 'postgres' },
  production: { url, dialect: 'postgres' },
};
