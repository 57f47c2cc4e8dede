import { expect } from 'chai';
import { ConnectionError, ConnectionRefusedError, DatabaseError, UniqueConstraintError } from 'sequelize';
import {
  answersUnavailable,
  isDatabaseBusy,
  isDatabaseUnavailable,
  rethrowUnique,
  uniqueViolation,
} from '../../core/db-errors.js';
import { Conflict, ServiceUnavailable, ValidationError } from '../../core/errors.js';
import { errorAnswer } from '../../routers/error-answer.js';

/** A driver error as pg raises it (message + SQLSTATE), optionally wrapped the way Sequelize wraps it. */
const pgError = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});
const wrapped = (err: Error) => new DatabaseError(err as ConstructorParameters<typeof DatabaseError>[0]);

/**
 * What a failover throws at the service (PostgreSQL shutting down, a replica refusing writes, HAProxy
 * or PgBouncer dropping the connection), each answered 503 with Retry-After: nothing was committed,
 * or the key's record says what was, so a retry with the same key is safe.
 */
const FAILOVER_ERRORS: Array<[string, Error]> = [
  [
    '57P01 admin shutdown (the leader is stopped)',
    wrapped(pgError('terminating connection due to administrator command', '57P01')),
  ],
  [
    '57P02 crash shutdown',
    wrapped(pgError('terminating connection because of crash of another server process', '57P02')),
  ],
  ['57P03 cannot connect now (starting up)', pgError('the database system is starting up', '57P03')],
  // A server with lc_messages in another language (PostgreSQL 15's de catalogue): the SQLSTATE decides.
  [
    '57P01 admin shutdown, in German',
    wrapped(pgError('Verbindung wird abgebrochen aufgrund von Anweisung des Administrators', '57P01')),
  ],
  ['57P03 starting up, in German', pgError('das Datenbanksystem startet', '57P03')],
  [
    '55P03 lock time-out, in German',
    wrapped(pgError('storniere Anfrage wegen Zeitüberschreitung einer Sperre', '55P03')),
  ],
  [
    '25006 read-only transaction (a replica behind the router)',
    wrapped(pgError('cannot execute INSERT in a read-only transaction', '25006')),
  ],
  [
    '40001 serialization failure',
    wrapped(pgError('could not serialize access due to concurrent update', '40001')),
  ],
  ['40P01 deadlock', wrapped(pgError('deadlock detected', '40P01'))],
  ['08006 connection failure', pgError('connection failure', '08006')],
  ['08P01 from PgBouncer: server conn crashed', wrapped(pgError('server conn crashed?', '08P01'))],
  ['08P01 from PgBouncer: query_wait_timeout', wrapped(pgError('query_wait_timeout', '08P01'))],
  [
    'refused (HAProxy or PgBouncer down)',
    new ConnectionRefusedError(pgError('connect ECONNREFUSED 127.0.0.1:6432', 'ECONNREFUSED')),
  ],
  [
    'a Unix socket with no server behind it (a local server stopped)',
    pgError('connect ENOENT /srv/app/.data/pg/.s.PGSQL.54329', 'ENOENT'),
  ],
  [
    'a write on a Unix socket the server closed (connections dropped)',
    wrapped(pgError('write EPIPE', 'EPIPE')),
  ],
  ['reset (HAProxy shut the session down)', new ConnectionError(pgError('read ECONNRESET', 'ECONNRESET'))],
  ['terminated unexpectedly', pgError('Connection terminated unexpectedly')],
  [
    'a client that is not queryable any more',
    pgError('Client has encountered a connection error and is not queryable'),
  ],
];

describe('database errors during a failover: classified, and answered 503 with Retry-After', () => {
  for (const [name, err] of FAILOVER_ERRORS) {
    it(`when the database fails with ${name}, then the answer is 503 with Retry-After, never 500`, () => {
      expect(isDatabaseUnavailable(err) || isDatabaseBusy(err), 'classified').to.equal(true);
      const answer = errorAnswer(err);
      expect(answer.status).to.equal(503);
      expect(answer.headers['Retry-After']).to.match(/^\d+$/);
      expect(answer.body.code).to.equal(503);
      expect(JSON.stringify(answer.body)).to.not.match(
        /at .*\.ts|ECONNREFUSED|ENOENT|EPIPE|PGSQL|127\.0\.0\.1/,
      );
    });
  }
  it('when a statement fails for a reason of its own (a syntax error), then it is not a failover: 500', () => {
    const err = wrapped(pgError('syntax error at or near "SELEC"', '42601'));
    expect(isDatabaseUnavailable(err)).to.equal(false);
    expect(isDatabaseBusy(err)).to.equal(false);
    expect(errorAnswer(err).status).to.equal(500);
  });
});

describe('answersUnavailable: the 503 set code below routers/ asks before an answer is given', () => {
  // idempotency/effect-run.ts answers 202 under a lease for exactly the errors that would otherwise be
  // answered 503; routers/error-answer.ts words those answers. Both must mean one set.
  const others: Array<[string, unknown]> = [
    ['a ServiceUnavailable (a `throw` failpoint)', new ServiceUnavailable('Injected failure', 1)],
    ['a syntax error', wrapped(pgError('syntax error at or near "SELEC"', '42601'))],
    ['a 409 conflict', new Conflict('state_conflict', 'status: not PENDING')],
    ['a validation error', new ValidationError('amount', 'must be positive')],
    ['a plain Error', new Error('boom')],
    [
      'a 409 whose cause is a dropped connection (the domain error decides)',
      Object.assign(new Conflict('unique_taken', 'username: already taken'), {
        cause: pgError('Connection terminated unexpectedly'),
      }),
    ],
  ];
  for (const [name, err] of [...FAILOVER_ERRORS, ...others]) {
    it(`when the error is ${name}, then answersUnavailable agrees with the answer's status`, () => {
      expect(answersUnavailable(err)).to.equal(errorAnswer(err).status === 503);
    });
  }
  it('when the errors are all of the list, then both kinds of answer occur (the agreement is not vacuous)', () => {
    const all = [...FAILOVER_ERRORS.map(([, e]) => e), ...others.map(([, e]) => e)];
    expect(all.filter(answersUnavailable)).to.have.length(FAILOVER_ERRORS.length + 1);
  });
});

describe('unique violations: from Sequelize or from the driver (core/sql.ts statements)', () => {
  const raw = Object.assign(pgError('duplicate key value violates unique constraint', '23505'), {
    constraint: 'users_tenant_username_key',
    sql: 'INSERT INTO users ...',
  });

  it('when either error shape reports 23505, then the constraint is named, and a listed one becomes 409 unique_taken', () => {
    expect(uniqueViolation(raw)).to.equal('users_tenant_username_key');
    const sequelizeShape = new UniqueConstraintError({ parent: raw, original: raw });
    expect(uniqueViolation(sequelizeShape)).to.equal('users_tenant_username_key');
    for (const err of [raw, sequelizeShape]) {
      expect(() => rethrowUnique(err, { users_tenant_username_key: 'username' }))
        .to.throw()
        .with.property('message', 'username: already taken');
    }
  });

  it('when the error is another one, or names an unlisted constraint, then it is thrown unchanged', () => {
    expect(uniqueViolation(pgError('deadlock detected', '40P01'))).to.equal(undefined);
    expect(() => rethrowUnique(raw, { other_key: 'email' }))
      .to.throw()
      .that.equals(raw);
  });
});
