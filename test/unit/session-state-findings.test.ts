// The pooler-safety test's checker (test/ha/wire-recorder.ts sessionStateFindings) on known texts:
// it must flag what would outlive a transaction on a shared server connection, and accept a SET
// LOCAL only where it holds (an explicit transaction, or a later statement of the same simple query).
import { expect } from 'chai';
import { sessionStateFindings, type WireMessage } from '../ha/wire-recorder.js';

const query = (text: string, status: WireMessage['status'] = 'I'): WireMessage => ({
  connection: 1,
  kind: 'query',
  name: '',
  text,
  status,
});
const parse = (text: string, name = ''): WireMessage => ({
  connection: 1,
  kind: 'parse',
  name,
  text,
  status: 'I',
});

describe('sessionStateFindings (the pooler-safety checker)', () => {
  it('when a SET LOCAL stands alone or last outside a transaction, then it is flagged; inside BEGIN, in a transaction, or before another statement of its simple query, then not', () => {
    expect(sessionStateFindings(query("SET LOCAL lock_timeout = '1s'"))).to.have.length(1);
    expect(sessionStateFindings(query("SELECT 1; SET LOCAL lock_timeout = '1s';"))).to.have.length(1);
    expect(sessionStateFindings(parse("SET LOCAL lock_timeout = '1s'"))).to.have.length(1);
    expect(sessionStateFindings(query("BEGIN; SET LOCAL lock_timeout = '1s'; SELECT 1"))).to.deep.equal([]);
    expect(sessionStateFindings(query("SET LOCAL lock_timeout = '1s'", 'T'))).to.deep.equal([]);
    expect(
      sessionStateFindings(query("SET LOCAL lock_timeout = '50ms';\n INSERT INTO t VALUES (1)")),
    ).to.deep.equal([]);
  });

  it('when a text sets session state (SET, PREPARE, a named statement, a session advisory lock), then it is flagged', () => {
    expect(sessionStateFindings(query("SET lock_timeout = '1s'; SELECT 1"))).to.have.length(1);
    expect(sessionStateFindings(query('PREPARE p AS SELECT 1'))).to.have.length(1);
    expect(sessionStateFindings(parse('SELECT 1', 'named'))).to.have.length(1);
    expect(sessionStateFindings(query('SELECT pg_advisory_lock(1)'))).to.have.length(1);
    expect(sessionStateFindings(query('SELECT pg_advisory_xact_lock(1)'))).to.deep.equal([]);
  });
});
