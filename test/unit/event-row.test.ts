import { expect } from 'chai';
import { parseEventRow } from '../../events/render.js';

describe('parseEventRow: an event snapshot with its numbers as text (events/render.ts)', () => {
  it('when the row holds numbers, then each is its text as PostgreSQL printed it', () => {
    const row = parseEventRow(
      '{"id":9007199254740993,"amount":10.50,"neg":-0.01,"exp":1.5e+3,"zero":0,"flag":true,"gone":null}',
    );
    expect(row).to.deep.equal({
      id: '9007199254740993',
      amount: '10.50',
      neg: '-0.01',
      exp: '1.5e+3',
      zero: '0',
      flag: true,
      gone: null,
    });
  });

  it('when strings hold digits, quotes, backslashes or colons, then they are left as they were', () => {
    const text = JSON.stringify({
      a: 'mo-123:45,6}',
      b: 'say "7" \\ 8',
      c: '\u00e9 9',
      '10': 'key of digits',
      at: '2026-11-26T09:43:00.123456+00:00',
    });
    expect(parseEventRow(text)).to.deep.equal(JSON.parse(text));
  });

  it('when the row was stored as jsonb with numbers as strings, then it parses the same', () => {
    expect(parseEventRow('{"amount": "10.50", "id": "7", "status": "PAID"}')).to.deep.equal({
      amount: '10.50',
      id: '7',
      status: 'PAID',
    });
  });

  it('when the text is not a JSON object, then it throws', () => {
    expect(() => parseEventRow('[1,2]')).to.throw(TypeError);
    expect(() => parseEventRow('null')).to.throw(TypeError);
    expect(() => parseEventRow('{"a":')).to.throw(SyntaxError);
  });
});
