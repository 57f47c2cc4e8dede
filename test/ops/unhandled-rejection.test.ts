import { expect } from 'chai';
import pg from 'pg';
import { unhandledRejectionPolicy } from '../../server/unhandled-rejection.js';

/**
 * The process survives a rejection nobody handled only when it says the database is unavailable (what
 * pg-boss 10's unawaited complete()/fail() reject with when PostgreSQL goes away: the instance died
 * of it in test/payments/payment-database-restart.test.ts); anything else still ends it.
 */
describe('unhandled promise rejections (server/unhandled-rejection.ts)', () => {
  const pgError = (code: string, message: string) =>
    Object.assign(new pg.DatabaseError(message, 0, 'error'), { code });

  it('when the database terminated the connection (57P01, as pg-boss complete() rejected), then the process survives', () => {
    expect(
      unhandledRejectionPolicy(pgError('57P01', 'terminating connection due to administrator command')),
    ).to.equal('survive');
  });

  it('when the connection was dropped or refused, then the process survives', () => {
    expect(unhandledRejectionPolicy(new Error('Connection terminated unexpectedly'))).to.equal('survive');
    expect(unhandledRejectionPolicy(Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }))).to.equal(
      'survive',
    );
  });

  it('when the rejection is any other error (a bug, a constraint), then the process exits', () => {
    expect(unhandledRejectionPolicy(new TypeError('x is undefined'))).to.equal('exit');
    expect(
      unhandledRejectionPolicy(pgError('23505', 'duplicate key value violates unique constraint')),
    ).to.equal('exit');
    expect(unhandledRejectionPolicy(undefined)).to.equal('exit');
    expect(unhandledRejectionPolicy('a string')).to.equal('exit');
  });
});
