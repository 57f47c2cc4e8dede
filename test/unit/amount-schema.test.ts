import { expect } from 'chai';
import { amountSchema, canonicalAmount, currencySchema } from '../../core/money.js';
import { createOrderInput } from '../../routers/orders/orders.schema.js';

function accepted(value: unknown): string {
  const parsed = amountSchema.safeParse(value);
  expect(parsed.success, `${String(value)} should be accepted`).to.equal(true);
  return parsed.data as string;
}

function refused(value: unknown): void {
  const parsed = amountSchema.safeParse(value);
  expect(parsed.success, `${String(value)} should be refused`).to.equal(false);
  expect(parsed.error?.issues[0].message).to.match(/positive decimal/);
}

describe('unit: amountSchema (positive, ≤ 12 integer digits, ≤ 2 fraction digits)', () => {
  it('when 10, 10.0, "10", "10.0" or "10.00" are parsed, then each becomes "10.00"', () => {
    for (const v of [10, 10.0, '10', '10.0', '10.00']) expect(accepted(v), String(v)).to.equal('10.00');
  });

  it('when small and fractional amounts are parsed, then two decimals are rendered', () => {
    expect(accepted(0.01)).to.equal('0.01');
    expect(accepted('0.5')).to.equal('0.50');
    expect(accepted(10.5)).to.equal('10.50');
  });

  it('when a string amount has whitespace around it (" 10.00", "10.00 ", "\\t10", "10.00\\n"), then refused, never trimmed', () => {
    for (const v of [' 10.00', '10.00 ', '\t10', '10.00\n', ' 7.25 ', '10 .00']) refused(v);
  });

  it('when the largest amount 123456789012.99 is parsed (number or string), then it is accepted exactly', () => {
    expect(accepted(123456789012.99)).to.equal('123456789012.99');
    expect(accepted('999999999999.99')).to.equal('999999999999.99');
  });

  it('when 0, 0.00 or -1 is parsed, then it is refused (not positive)', () => {
    for (const v of [0, '0', '0.00', -1, '-1', -0.01]) refused(v);
  });

  it('when more than two fraction digits are given (0.001, "1.234"), then refused, never rounded', () => {
    for (const v of [0.001, '0.001', '1.234', 10.005]) refused(v);
  });

  it('when 13 integer digits are given (1234567890123), then refused', () => {
    refused(1234567890123);
    refused('1234567890123');
    refused('1000000000000.00');
  });

  it('when 1e21 (printed in exponent form) or "1e3" is given, then refused', () => {
    refused(1e21);
    refused('1e3');
  });

  it('when 0.1 + 0.2 is given (0.30000000000000004), then refused rather than rounded to 0.30', () => {
    refused(0.1 + 0.2);
  });

  it('when a non-numeric or malformed value is given, then refused', () => {
    for (const v of [
      'abc',
      '',
      ' ',
      '10.',
      '.5',
      '010',
      '+10',
      '1,00',
      Number.NaN,
      Infinity,
      null,
      true,
      [],
      {},
    ])
      refused(v);
  });

  it('when canonicalAmount pads, then exactly two fraction digits', () => {
    expect(canonicalAmount('3')).to.equal('3.00');
    expect(canonicalAmount('3.1')).to.equal('3.10');
    expect(canonicalAmount('3.14')).to.equal('3.14');
  });
});

describe('unit: createOrderInput defaults', () => {
  it('when currency is omitted, then "USD"; when given in lower case, then refused', () => {
    expect(createOrderInput.parse({ merchantOrderNo: 'm', amount: 1 }).currency).to.equal('USD');
    expect(currencySchema.safeParse('usd').success).to.equal(false);
    expect(currencySchema.safeParse('EURO').success).to.equal(false);
  });

  it('when an unknown field is sent, then the strict schema refuses it', () => {
    expect(createOrderInput.safeParse({ merchantOrderNo: 'm', amount: 1, extra: 1 }).success).to.equal(false);
  });
});
