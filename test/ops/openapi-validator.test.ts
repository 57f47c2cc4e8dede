import { expect } from 'chai';
import { appRouter } from '../../routers/index.js';
import { buildOpenApiDocument } from '../../server/openapi.js';
import type { RecordedCall } from '../support/http.js';
import { createOpenApiValidator, type OpenApiDocument } from '../support/openapi-validator.js';

// The conformance check is only worth something if it can fail: it is fed hand-made answers here.
const validator = createOpenApiValidator(buildOpenApiDocument(appRouter, '/') as unknown as OpenApiDocument);

const user = {
  id: '7',
  name: 'Ann',
  age: 30,
  username: null,
  email: null,
  role: 'user',
  status: 'ACTIVE',
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};

function call(overrides: Partial<RecordedCall>): RecordedCall {
  const body = overrides.body ?? { code: 200, message: 'Success', data: user };
  return {
    method: 'GET',
    path: '/api/v1/users/7',
    baseUrl: 'http://127.0.0.1:1',
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'r1' },
    body,
    text: JSON.stringify(body),
    ...overrides,
  };
}

const problems = (c: RecordedCall) => validator.check(c).map((v) => v.problem);

describe('ops: the OpenAPI response validator', () => {
  it('when an answer matches its operation, then no violation', () => {
    expect(problems(call({}))).to.deep.equal([]);
  });

  it('when concrete and alias paths are resolved, then they map to the canonical template', () => {
    expect(validator.resolve('GET', '/api/users/12?x=1')).to.deep.equal({
      kind: 'operation',
      template: '/api/v1/users/{id}',
      method: 'get',
    });
    expect(validator.resolve('PUT', '/users/12/status')).to.include({
      template: '/api/v1/users/{id}/status',
    });
    expect(validator.resolve('POST', '/payments')).to.include({ template: '/api/v1/payments' });
    expect(validator.resolve('PATCH', '/api/v1/orders/1')).to.include({ kind: 'wrong-method' });
    expect(validator.resolve('GET', '/api/v1/users/12/')).to.deep.equal({ kind: 'undocumented' });
    for (const path of ['/trpc/users.get', '/openapi.json', '/docs', '/docs/assets/x.js', '/metrics'])
      expect(validator.resolve('GET', path), path).to.deep.equal({ kind: 'exempt' });
  });

  it('when the status is not documented, then a violation names it', () => {
    expect(problems(call({ status: 418 }))[0]).to.match(/status 418 is not documented/);
  });

  it('when a required header is missing, then a violation names it', () => {
    expect(problems(call({ headers: { 'content-type': 'application/json' } }))).to.deep.equal([
      'required header X-Request-Id is missing',
    ]);
  });

  it('when the body breaks the schema (extra field, wrong type, bad date), then violations are reported', () => {
    const bad = { code: 200, message: 'Success', data: { ...user, age: '30', password: 'x' } };
    expect(problems(call({ body: bad }))[0]).to.match(/does not match the schema/);
    const date = { code: 200, message: 'Success', data: { ...user, createdAt: 'yesterday' } };
    expect(problems(call({ body: date }))[0]).to.match(/createdAt/);
    const error = { code: 404, message: 'Not found', data: {} };
    expect(problems(call({ status: 404, body: error }))[0]).to.match(/data/);
  });

  it('when a 204 carries a body or an answer is not JSON, then a violation is reported', () => {
    const deleted = call({ method: 'DELETE', status: 204, body: undefined, text: 'x' });
    expect(problems(deleted)[0]).to.match(/without a body/);
    expect(problems(call({ body: undefined, text: '<html>' }))[0]).to.match(/not JSON/);
  });

  it('when an unknown path answers 404 without the envelope, or a wrong method lacks 405 + Allow, then violations', () => {
    const unknown = call({ path: '/nope', status: 404, body: { error: 'x' }, text: '{"error":"x"}' });
    expect(problems(unknown)[0]).to.match(/not the envelope/);
    const error = { code: 405, message: 'Method not allowed', data: null };
    expect(
      problems(call({ method: 'PATCH', path: '/api/v1/orders/1', status: 405, body: error })),
    ).to.deep.equal(['405 without an Allow header']);
    expect(
      problems(call({ method: 'PATCH', path: '/api/v1/orders/1', status: 404, body: error }))[0],
    ).to.match(/expected 405/);
  });
});
