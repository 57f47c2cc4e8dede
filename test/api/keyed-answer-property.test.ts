import { expect } from 'chai';
import fc from 'fast-check';
import { http } from '../support/http.js';
import { idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { adminOf } from '../support/users.js';

/**
 * Issue 26, defect 2: the keyed create's answer is built from its input before the write, so it must
 * be exactly what PostgreSQL stores. For generated text (astral characters, NFC and NFD forms,
 * quotes, backslashes, the longest values, lone surrogates): either a 400 naming the field, or a 201
 * whose answer equals GET's row field by field, and its replay equals it too.
 */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

const piece = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 6 }),
  fc.constantFrom(
    '"',
    "'",
    '\\',
    '\\u0041',
    '😀',
    '𝔘',
    '👩‍👩‍👧',
    'é',
    'e\u0301',
    'Å',
    '\u212b',
    ' ',
    '\t',
    '\n',
    '\u00a0',
  ),
  fc.constantFrom('\ud800', '\udc00', '\udbff'),
);
const text = (max: number) =>
  fc
    .tuple(fc.array(piece, { maxLength: 12 }), fc.constantFrom('NFC', 'NFD', 'none'), fc.boolean())
    .map(([parts, form, longest]) => {
      const joined = parts.join('');
      const s = form === 'none' ? joined : joined.normalize(form);
      // Or the longest value the field allows.
      return (longest ? s.padEnd(max, 'x') : s).replaceAll('\0', '') || 'x';
    })
    .filter((s) => s.length <= max);

const ASCII_ID = fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/);

async function checkCreate(
  path: string,
  tenant: string,
  body: Record<string, unknown>,
  textFields: string[],
): Promise<void> {
  const headers = { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() };
  const created = await http('POST', path, { headers, body });
  const lone = textFields.find((f) => typeof body[f] === 'string' && LONE_SURROGATE.test(body[f] as string));
  if (lone) {
    expect(created.status, created.text).to.equal(400);
    expect(created.body.message).to.match(new RegExp(`^${lone}: `));
    return;
  }
  expect(created.status, created.text).to.equal(201);
  const answer = created.body.data;
  for (const f of textFields) if (body[f] !== undefined) expect(answer[f], f).to.equal(body[f]);
  const read = await http('GET', `${path}/${answer.id}`, { headers: adminOf(tenant) });
  expect(read.status, read.text).to.equal(200);
  expect(answer).to.deep.equal(read.body.data);
  const replay = await http('POST', path, { headers, body });
  expect(replay.body).to.deep.equal(created.body);
}

describe('a keyed create answers what is stored (property, over REST)', function () {
  this.timeout(120000);

  it('when users are created with generated names, then each answer equals GET, its replay, and the keyless create has the same fields', async () => {
    const tenant = uniqueTenant('prop');
    const keyless = await http('POST', '/api/v1/users', {
      headers: adminOf(tenant),
      body: { name: 'Plain', age: 1 },
    });
    expect(keyless.status, keyless.text).to.equal(201);
    let n = 0;
    await fc.assert(
      fc.asyncProperty(text(100), fc.integer({ min: 0, max: 150 }), async (name, age) => {
        n += 1;
        const body = { name, age, username: `p${n}_${Date.now().toString(36)}` };
        await checkCreate('/api/v1/users', tenant, body, ['name']);
      }),
      { numRuns: 60 },
    );
    const keyed = await http('POST', '/api/v1/users', {
      headers: { ...adminOf(tenant), 'Idempotency-Key': idempotencyKey() },
      body: { name: 'Keyed', age: 2 },
    });
    expect(Object.keys(keyed.body.data).sort()).to.deep.equal(Object.keys(keyless.body.data).sort());
  });

  it('when orders are created with generated descriptions and merchantOrderNo, then each answer equals GET and its replay', async () => {
    const tenant = uniqueTenant('prop');
    let n = 0;
    await fc.assert(
      fc.asyncProperty(ASCII_ID, fc.option(text(200), { nil: undefined }), async (generated, description) => {
        n += 1;
        // Unique in the tenant (a shrunk value would meet one taken earlier: 409), up to 64 characters.
        const merchantOrderNo = `${n}-${generated}`.slice(0, 64);
        const body = { merchantOrderNo, amount: '12.34', description };
        await checkCreate('/api/v1/orders', tenant, body, ['merchantOrderNo', 'description']);
      }),
      { numRuns: 60 },
    );
  });
});
