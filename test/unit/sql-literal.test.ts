import { expect } from 'chai';
import { Sequelize } from 'sequelize';
import { sqlLiteral } from '../../core/sql.js';

describe('sqlLiteral (core/sql.ts): the literals of the multi-statement round trips', () => {
  // Sequelize's own escape for PostgreSQL, which these statements used before: no connection is made.
  const sequelize = new Sequelize('postgres://nobody@127.0.0.1:1/none', {
    dialect: 'postgres',
    logging: false,
  });
  after(() => sequelize.close());

  it('when a string holds quotes, backslashes, a NUL, newlines or non-ASCII text, then it is written exactly as Sequelize escapes it', () => {
    const samples = [
      '',
      'plain',
      "O'Brien",
      "''",
      'back\\slash',
      "a\\'b",
      'nul\0inside',
      'line\nbreak\r\ttab',
      'ünïcødé 支払い 💳',
      '{"merchantOrderNo":"d53f","amount":"f627"}',
      "'; DROP TABLE users; --",
    ];
    for (const s of samples) expect(sqlLiteral(s), JSON.stringify(s)).to.equal(sequelize.escape(s));
  });

  it('when the value is null, then NULL; when it is a date, then its ISO 8601 instant in quotes', () => {
    expect(sqlLiteral(null)).to.equal('NULL');
    expect(sqlLiteral(new Date('2026-11-24T18:30:47.857Z'))).to.equal("'2026-11-24T18:30:47.857Z'");
  });
});
