import { expect } from 'chai';
import { http, recordedCalls } from '../support/http.js';
import {
  createOpenApiValidator,
  formatViolations,
  type OpenApiDocument,
} from '../support/openapi-validator.js';
import { sharedServer } from '../support/server.js';
import { uniqueTenant } from '../support/tokens.js';
import { adminOf } from '../support/users.js';

const conformance = describe('OpenAPI conformance of every REST answer of the run', () => {
  it('when every answer recorded by http() is checked against /openapi.json, then none violates its operation', async function () {
    this.timeout(120000);
    // Run alone, this file still checks something: a few answers of its own (success, error, alias, 404).
    const admin = adminOf(uniqueTenant('oas'));
    await http('GET', '/api/v1/users?page=1&size=2', { headers: admin });
    await http('GET', '/api/users', { headers: admin });
    await http('GET', '/api/v1/users/not-a-number', { headers: admin });
    await http('GET', '/api/v1/no-such-path');

    const res = await fetch(`${(await sharedServer()).url}/openapi.json`);
    expect(res.status).to.equal(200);
    const validator = createOpenApiValidator((await res.json()) as OpenApiDocument);
    const calls = [...recordedCalls];
    const checked = calls.filter((c) => validator.resolve(c.method, c.path).kind !== 'exempt');
    const violations = validator.validateAll(calls);
    expect(checked.length).to.be.greaterThan(3);
    expect(
      violations.length,
      `${violations.length} of ${checked.length} REST answers contradict /openapi.json:\n${formatViolations(violations)}`,
    ).to.equal(0);
  });
});

// Mocha runs spec files in glob order (test/ops/ sorts before test/payments/ and test/unit/), so this
// suite moves itself to the end of the root suite once every file is loaded: a root-level before hook
// runs after loading and before the first test, and the runner reads the root's suites lazily.
before(function moveConformanceLast() {
  const root = conformance.parent;
  if (!root) return;
  root.suites.splice(root.suites.indexOf(conformance), 1);
  root.suites.push(conformance);
});
