import { appRouter } from '../../routers/index.js';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { recordedCalls } from '../support/http.js';
import {
  createOpenApiValidator,
  formatViolations,
  type OpenApiDocument,
} from '../support/openapi-validator.js';

/**
 * Mocha root hook: after the whole run, every REST answer recorded by test/support/http.ts is checked
 * against the document the service serves at /openapi.json (built the same way, round-tripped through
 * JSON as a client receives it). A violation fails the run ("after all" hook). Registered before
 * test/setup/global.ts in .mocharc.json, so it runs before the shared server is stopped.
 */
export const mochaHooks = {
  afterAll(this: Mocha.Context) {
    this.timeout(120000);
    const calls = [...recordedCalls];
    if (calls.length === 0) return;
    const doc = JSON.parse(JSON.stringify(buildOpenApiDocument(appRouter, '/'))) as OpenApiDocument;
    const validator = createOpenApiValidator(doc);
    const checked = calls.filter((c) => validator.resolve(c.method, c.path).kind !== 'exempt');
    const violations = validator.validateAll(calls);
    if (violations.length > 0) {
      throw new Error(
        `${violations.length} of ${checked.length} REST answers contradict /openapi.json:\n${formatViolations(violations)}`,
      );
    }
    console.log(
      `  OpenAPI conformance: ${checked.length} REST answers checked against /openapi.json, none violates it`,
    );
  },
};
