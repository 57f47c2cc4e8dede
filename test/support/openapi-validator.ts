import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { RecordedCall } from './http.js';

// CommonJS default exports seen through NodeNext typings: the runtime value is the class/function itself.
const Ajv2020 = Ajv2020Module as unknown as typeof Ajv2020Module.default;
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

interface HeaderObject {
  required?: boolean;
}
interface ResponseObject {
  headers?: Record<string, HeaderObject>;
  content?: Record<string, { schema?: object }>;
}
interface OperationObject {
  responses: Record<string, ResponseObject>;
}
export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, OperationObject>>;
}

/**
 * The seed's unversioned paths, from CONTRACT section 3 (written out here rather than imported from
 * server/rest-routes.ts, so that the check does not trust the routing it checks).
 */
const CONTRACT_ALIASES: Array<{ alias: string; canonical: string; methods: string[] }> = [
  { alias: '/api/users', canonical: '/api/v1/users', methods: ['GET', 'POST'] },
  { alias: '/api/users/{id}', canonical: '/api/v1/users/{id}', methods: ['GET', 'DELETE'] },
  { alias: '/users/{id}/status', canonical: '/api/v1/users/{id}/status', methods: ['PUT'] },
  { alias: '/orders', canonical: '/api/v1/orders', methods: ['POST'] },
  { alias: '/orders/{id}', canonical: '/api/v1/orders/{id}', methods: ['GET'] },
  { alias: '/payments', canonical: '/api/v1/payments', methods: ['POST'] },
  { alias: '/payments/{id}', canonical: '/api/v1/payments/{id}', methods: ['GET'] },
];

/** Exempt from the envelope (CONTRACT section 2): the document, the docs page, metrics, tRPC. */
const EXEMPT = [/^\/trpc(\/|$)/, /^\/openapi\.json$/, /^\/docs/, /^\/metrics$/];

/** Any envelope (CONTRACT section 2), for answers on paths the document does not describe. */
const ENVELOPE = {
  type: 'object',
  required: ['code', 'message', 'data'],
  properties: { code: { type: 'integer' }, message: { type: 'string' }, data: {} },
  additionalProperties: false,
};
const ERROR_ENVELOPE = { ...ENVELOPE, properties: { ...ENVELOPE.properties, data: { type: 'null' } } };

export type Resolution =
  | { kind: 'exempt' }
  | { kind: 'undocumented' }
  | { kind: 'operation'; template: string; method: string }
  | { kind: 'wrong-method'; template: string; allowed: string[] };

export interface Violation {
  call: RecordedCall;
  /** The operation (`GET /api/v1/users/{id}`) or the raw path when none applies. */
  operation: string;
  problem: string;
}

function templateRegExp(template: string): RegExp {
  const escaped = template
    .split(/\{[^}]+\}/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[^/]+');
  return new RegExp(`^${escaped}$`);
}

const jsonPointer = (...parts: string[]) =>
  parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

/**
 * Validates recorded REST answers against an OpenAPI 3.1 document: the status is documented for the
 * operation, the documented required headers are present, and a JSON body matches the response
 * schema (Ajv, JSON Schema 2020-12, formats checked). The document is registered as one schema so
 * that `#/components/...` references resolve.
 */
export function createOpenApiValidator(doc: OpenApiDocument) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  ajv.addSchema(doc as object, 'openapi.json');
  const anyEnvelope = ajv.compile(ENVELOPE);
  const errorEnvelope = ajv.compile(ERROR_ENVELOPE);
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>();
  const templates = Object.keys(doc.paths).map((template) => ({ template, regex: templateRegExp(template) }));
  const aliases = CONTRACT_ALIASES.map((a) => ({ ...a, regex: templateRegExp(a.alias) }));

  function schemaFor(template: string, method: string, status: string, mediaType: string) {
    const pointer = `openapi.json#/${jsonPointer('paths', template, method, 'responses', status, 'content', mediaType, 'schema')}`;
    let validate = compiled.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: pointer });
      compiled.set(pointer, validate);
    }
    return validate;
  }

  /** Which documented operation a concrete request addresses (aliases mapped to their canonical path). */
  function resolve(method: string, rawPath: string): Resolution {
    const path = rawPath.split('?')[0];
    if (EXEMPT.some((re) => re.test(path))) return { kind: 'exempt' };
    const m = method.toLowerCase();
    const alias = aliases.find((a) => a.regex.test(path));
    if (alias) {
      if (!alias.methods.includes(method.toUpperCase()))
        return { kind: 'wrong-method', template: alias.alias, allowed: alias.methods };
      if (!doc.paths[alias.canonical]?.[m]) return { kind: 'undocumented' };
      return { kind: 'operation', template: alias.canonical, method: m };
    }
    const found = templates.find((t) => t.regex.test(path));
    if (!found) return { kind: 'undocumented' };
    const ops = doc.paths[found.template];
    if (!ops[m]) {
      return {
        kind: 'wrong-method',
        template: found.template,
        allowed: Object.keys(ops).map((k) => k.toUpperCase()),
      };
    }
    return { kind: 'operation', template: found.template, method: m };
  }

  function checkEnvelope(call: RecordedCall, validate: typeof anyEnvelope): string[] {
    const problems: string[] = [];
    if (!/^application\/json/.test(call.headers['content-type'] ?? ''))
      problems.push(`Content-Type is ${JSON.stringify(call.headers['content-type'])}, not application/json`);
    if (call.body === undefined)
      problems.push(`body is not JSON: ${JSON.stringify(call.text.slice(0, 120))}`);
    else if (!validate(call.body))
      problems.push(`body is not the envelope: ${ajv.errorsText(validate.errors)}`);
    return problems;
  }

  function checkOperation(call: RecordedCall, template: string, method: string): string[] {
    const responses = doc.paths[template][method].responses;
    const status = String(call.status);
    const key = [status, `${status[0]}XX`, 'default'].find((k) => responses[k]);
    if (!key)
      return [`status ${status} is not documented (documented: ${Object.keys(responses).join(', ')})`];
    const response = responses[key];
    const problems: string[] = [];
    for (const [name, h] of Object.entries(response.headers ?? {})) {
      if (h.required && call.headers[name.toLowerCase()] === undefined)
        problems.push(`required header ${name} is missing`);
    }
    const mediaTypes = Object.keys(response.content ?? {});
    if (mediaTypes.length === 0) {
      if (call.text !== '')
        problems.push(`documented without a body, but has ${call.text.length} characters`);
      return problems;
    }
    const contentType = (call.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (!mediaTypes.includes(contentType)) {
      problems.push(`Content-Type ${JSON.stringify(contentType)} is not one of ${mediaTypes.join(', ')}`);
      return problems;
    }
    if (contentType === 'application/json' && call.body === undefined) {
      problems.push(`body is not JSON: ${JSON.stringify(call.text.slice(0, 120))}`);
      return problems;
    }
    // A file (an export's CSV or NDJSON) is checked for its media type only: its schema is a string.
    if (contentType !== 'application/json') return problems;
    const validate = schemaFor(template, method, key, contentType);
    if (!validate(call.body))
      problems.push(`body does not match the schema: ${ajv.errorsText(validate.errors)}`);
    return problems;
  }

  /** The problems of one recorded answer (empty when it conforms or is exempt). */
  function check(call: RecordedCall): Violation[] {
    const r = resolve(call.method, call.path);
    const raw = `${call.method} ${call.path.split('?')[0]}`;
    const violation = (operation: string) => (problem: string) => ({ call, operation, problem });
    if (r.kind === 'exempt') return [];
    if (r.kind === 'undocumented') {
      // Not an operation of the document, but still an answer of the service: the envelope of section 2.
      return checkEnvelope(call, call.status >= 400 ? errorEnvelope : anyEnvelope).map(violation(raw));
    }
    if (r.kind === 'wrong-method') {
      const op = `${call.method} ${r.template}`;
      // A known path with another method: routing errors come first (section 3), so 405 + Allow.
      const problems =
        call.status === 405 ? [] : [`expected 405 for an undocumented method, got ${call.status}`];
      if (call.status === 405 && !call.headers.allow) problems.push('405 without an Allow header');
      problems.push(...checkEnvelope(call, errorEnvelope));
      return problems.map(violation(op));
    }
    return checkOperation(call, r.template, r.method).map(violation(`${call.method} ${r.template}`));
  }

  return { resolve, check, validateAll: (calls: RecordedCall[]) => calls.flatMap(check) };
}

/** One line per distinct problem (operation, status, problem), with a count and one example request. */
export function formatViolations(violations: Violation[]): string {
  const groups = new Map<string, { count: number; example: Violation }>();
  for (const v of violations) {
    const key = `${v.operation} → ${v.call.status}: ${v.problem}`;
    const g = groups.get(key);
    if (g) g.count += 1;
    else groups.set(key, { count: 1, example: v });
  }
  return [...groups.entries()]
    .map(
      ([key, { count, example }]) =>
        `- ${key} (${count}×; e.g. ${example.call.method} ${example.call.path.slice(0, 120)} → ${example.call.text.slice(0, 200)})`,
    )
    .join('\n');
}
