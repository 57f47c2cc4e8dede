import { generateOpenApiDocument, type OpenAPIObject } from 'trpc-to-openapi';
import { z } from 'zod';
import { processingSchema } from '../core/envelope.js';
import type { AppRouter } from '../routers/index.js';
import { metaByProcedure } from '../routers/meta.js';
import { EXPORT_FILE_PATH } from './export-file.js';
import { ALIASES } from './rest-routes.js';

const errorEnvelope = {
  type: 'object',
  required: ['code', 'message', 'data'],
  properties: {
    code: { type: 'integer' },
    message: { type: 'string' },
    // null, or for a 409 40901 the JSON pointers of the body fields that differ from the first request.
    data: {
      oneOf: [
        { type: 'null' },
        {
          type: 'object',
          required: ['mismatch'],
          properties: { mismatch: { type: 'array', items: { type: 'string' } } },
          additionalProperties: false,
        },
      ],
    },
  },
  additionalProperties: false,
};

/** The 202 body (CONTRACT section 2), from the same zod schema the procedures answer with. */
const { $schema: _dialect, ...PROCESSING_ENVELOPE } = z.toJSONSchema(processingSchema, { io: 'output' });

/**
 * The seed's unversioned paths (server/rest-routes.ts ALIASES), served as thin rewrites: described as
 * deprecated copies of their canonical operation, saying which one.
 */
function describeAliases(doc: OpenAPIObject): void {
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Record<string, unknown>>>;
  for (const { alias, canonical, methods } of ALIASES) {
    for (const method of methods.map((m) => m.toLowerCase())) {
      const op = paths[canonical]?.[method];
      if (!op) continue;
      const copy = JSON.parse(JSON.stringify(op)) as Record<string, unknown>;
      copy.operationId = `${String(op.operationId)}-alias`;
      copy.deprecated = true;
      copy.description = `Deprecated alias of ${method.toUpperCase()} ${canonical}: the same operation (validation, auth, idempotency record and fingerprint); use the canonical path.`;
      paths[alias] ??= {};
      paths[alias][method] = copy;
    }
  }
  doc.paths = paths as OpenAPIObject['paths'];
}

/** The probes: liveness, and readiness (503 while the database is unreachable or migrations are pending). */
function describeProbes(doc: OpenAPIObject): void {
  const ok = {
    description: 'The instance is up (healthz) or ready to serve (readyz)',
    headers: { 'X-Request-Id': REQUEST_ID },
    content: {
      'application/json': {
        schema: {
          type: 'object',
          required: ['code', 'message', 'data'],
          properties: {
            code: { type: 'integer', const: 200 },
            message: { type: 'string' },
            data: {
              type: 'object',
              required: ['status'],
              properties: { status: { type: 'string', const: 'ok' } },
            },
          },
        },
      },
    },
  };
  const probe = (operationId: string, summary: string, unready: boolean) => ({
    get: {
      operationId,
      summary,
      tags: ['ops'],
      security: [],
      responses: {
        '200': ok,
        ...(unready ? { '503': errorResponse('503', false) } : {}),
        '405': errorResponse('405', false),
      },
    },
  });
  const paths = (doc.paths ?? {}) as Record<string, unknown>;
  paths['/healthz'] = probe('healthz', 'Liveness: the process answers', false);
  paths['/readyz'] = probe('readyz', 'Readiness: database reachable and migrations applied', true);
  doc.paths = paths as OpenAPIObject['paths'];
}

/** The export's file: a plain route (a raw body, which tRPC cannot answer), described by hand. */
function describeExportFile(doc: OpenAPIObject): void {
  const paths = (doc.paths ?? {}) as Record<string, unknown>;
  const errors = Object.fromEntries(
    ['400', '401', '403', '404', '405', '409', '500', '503'].map((s) => [s, errorResponse(s, false)]),
  );
  errors['409'].description = 'Conflict: 40903 the export has not SUCCEEDED (still PROCESSING, or FAILED)';
  errors['404'].description = 'No such export (or another tenant’s, or not yours), or its file expired';
  paths[EXPORT_FILE_PATH] = {
    get: {
      operationId: 'exports-file',
      summary: 'Download an export’s file (streamed, no envelope)',
      tags: ['exports'],
      security: [{ Authorization: [] }],
      parameters: [
        { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^[1-9][0-9]{0,18}$' } },
      ],
      responses: {
        '200': {
          description: 'The file: CSV (one header line, RFC 4180) or NDJSON, one row of the export per line',
          headers: {
            'X-Request-Id': REQUEST_ID,
            'Content-Disposition': header('attachment; filename="export-<id>.<format>"', true),
          },
          content: {
            'text/csv': { schema: { type: 'string' } },
            'application/x-ndjson': { schema: { type: 'string' } },
          },
        },
        ...errors,
      },
    },
  };
  doc.paths = paths as OpenAPIObject['paths'];
}

const TAG_DESCRIPTIONS: Record<string, string> = {
  ops: 'Probes for orchestrators and balancers (public)',
  tokens: 'Bearer tokens for a tenant user (public)',
  users: 'Users of a tenant (admin, or the user itself)',
  orders: 'Orders; creating one needs an Idempotency-Key',
  payments: 'Payments of orders, charged exactly once at the gateway',
  events: 'The event feed (the outbox); the subscription events.onEvent is tRPC over SSE, not REST (README)',
  exports: 'Exports of orders or payments: long-running work with a task id, then a file',
};

const ERROR_DESCRIPTIONS: Record<string, string> = {
  '400': 'Validation failure, malformed JSON, bad Idempotency-Key or bad path id',
  '401': 'Missing, invalid or expired token',
  '403': 'Not allowed (or the user is DISABLED)',
  '404': 'No such resource (or another tenant’s)',
  '405': 'Method not allowed on this path',
  '409':
    'Conflict: 40901 key reused with another request, 40902 business key reused, 40903 state, 40904 unique field, 40905 key expired (purged), 40906 refund exceeds what is left',
  '413': 'Body larger than MAX_BODY_BYTES',
  '415': 'Body is not application/json',
  '429': 'Idempotency limits: 42901 too many in flight, 42902 too many retained keys',
  '500': 'Internal server error',
  '503': 'Database or payment gateway unavailable; safe to retry with the same Idempotency-Key',
};

const header = (description: string, required = false) => ({
  description,
  required,
  schema: { type: 'string' },
});
const REQUEST_ID = header('Echo of the request’s X-Request-Id, or a generated one', true);
const REPLAYED = header('"true" when this is the stored answer of an earlier request with the same key');
const RETRY_AFTER = header('Seconds to wait before retrying', true);
const WWW_AUTHENTICATE = header('Bearer', true);
const ALLOW = header('Methods this path supports', true);

type Responses = Record<
  string,
  { description: string; headers?: Record<string, unknown>; content?: unknown }
>;
type Operation = {
  responses: Responses;
  parameters?: unknown[];
  requestBody?: unknown;
  security?: unknown[];
};

function errorResponse(status: string, idempotent: boolean): Responses[string] {
  const headers: Record<string, unknown> = { 'X-Request-Id': REQUEST_ID };
  if (status === '401') headers['WWW-Authenticate'] = WWW_AUTHENTICATE;
  if (status === '405') headers.Allow = ALLOW;
  if (status === '429' || status === '503') headers['Retry-After'] = RETRY_AFTER;
  if (idempotent && /^4/.test(status)) headers['Idempotent-Replayed'] = REPLAYED;
  return {
    description: ERROR_DESCRIPTIONS[status] ?? 'Error',
    headers,
    content: { 'application/json': { schema: errorEnvelope } },
  };
}

/** Splits a union success schema into the final answer and the 202 PROCESSING answer. */
function splitProcessing(
  schema: { anyOf?: Array<{ properties?: { code?: { const?: number } } }> } | undefined,
) {
  const variants = schema?.anyOf;
  if (!variants) return { success: schema, processing: undefined };
  const processing = variants.find((v) => v.properties?.code?.const === 202);
  const rest = variants.filter((v) => v !== processing);
  return { success: rest.length === 1 ? rest[0] : { anyOf: rest }, processing };
}

/**
 * The OpenAPI document is generated from the procedures; this corrects what trpc-to-openapi cannot
 * know: the real success status (201/204), the 202 PROCESSING answer, the envelope of every error,
 * the Idempotency-Key parameter and the headers of CONTRACT section 7.
 */
export function buildOpenApiDocument(router: AppRouter, baseUrl: string): OpenAPIObject {
  const doc = generateOpenApiDocument(router, {
    title: 'Idempotent service',
    version: '1.0.0',
    baseUrl,
    description:
      'Users, orders and payments with exactly-once mutating operations (see the Idempotency-Key parameter). ' +
      'Every JSON body is the envelope {code, message, data}.',
    securitySchemes: { Authorization: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
  });
  const metaByRoute = new Map(
    [...metaByProcedure(router).values()].flatMap((meta) =>
      meta.openapi ? [[`${meta.openapi.method.toLowerCase()} ${meta.openapi.path}`, meta] as const] : [],
    ),
  );
  for (const [path, ops] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(ops as Record<string, Operation>)) {
      const meta = metaByRoute.get(`${method} ${path}`);
      const idempotent = meta?.idempotencyKey !== undefined;
      const successStatus = String(meta?.successStatus ?? 200);
      const generated = op.responses['200'] as
        | { content?: { 'application/json'?: { schema?: unknown } } }
        | undefined;
      const { success, processing } = splitProcessing(
        generated?.content?.['application/json']?.schema as Parameters<typeof splitProcessing>[0],
      );
      const successHeaders: Record<string, unknown> = { 'X-Request-Id': REQUEST_ID };
      if (meta?.createdLocation)
        successHeaders.Location = header('Canonical path of the created resource', true);
      if (idempotent) successHeaders['Idempotent-Replayed'] = REPLAYED;
      const responses: Responses = {};
      responses[successStatus] =
        successStatus === '204'
          ? { description: 'No content', headers: successHeaders }
          : {
              description: 'Success',
              headers: successHeaders,
              content: { 'application/json': { schema: success } },
            };
      // A keyed operation without a body (DELETE) answers 202 too while its first request runs.
      const processingBody = processing ?? (idempotent ? PROCESSING_ENVELOPE : undefined);
      if (successStatus === '202') {
        // An accepted task (an export): its 202 is the answer, replayed too, always with Location.
        responses['202'] = {
          description:
            'Accepted: the work runs in the background; poll Location. (A duplicate that arrives while the ' +
            "first request's transaction is still open past IDEMPOTENCY_WAIT_MS, a stalled database, gets " +
            '202 with resourceId null and no Location: the task does not exist for anyone else yet.)',
          headers: {
            ...successHeaders,
            'Retry-After': RETRY_AFTER,
            Location: header('The task (the resource being processed)', true),
          },
          content: { 'application/json': { schema: processingBody } },
        };
      } else if (processingBody) {
        responses['202'] = {
          description:
            'The first request with this Idempotency-Key is still processing; poll Location or retry',
          headers: {
            'X-Request-Id': REQUEST_ID,
            'Retry-After': RETRY_AFTER,
            Location: header('The resource being processed, when its id is known'),
          },
          content: { 'application/json': { schema: processingBody } },
        };
      }
      const errors = ['400', '404', '405', '500', '503'];
      if (op.security && op.security.length > 0) errors.push('401', '403');
      if (op.requestBody) errors.push('413', '415');
      if (idempotent) errors.push('409', '429');
      if (path === '/api/v1/tokens') errors.push('401');
      for (const status of [...new Set(errors)].sort()) responses[status] = errorResponse(status, idempotent);
      op.responses = responses;
      // A PATCH body is a non-empty subset of known fields (CONTRACT section 3: {} and unknown keys are 400).
      const body = (
        op as { requestBody?: { content?: Record<string, { schema?: Record<string, unknown> }> } }
      ).requestBody?.content?.['application/json']?.schema;
      if (method === 'patch' && body) Object.assign(body, { additionalProperties: false, minProperties: 1 });
      if (meta?.idempotencyKey) {
        op.parameters = [
          ...(op.parameters ?? []),
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: meta.idempotencyKey === 'required',
            description:
              'One high-entropy key per business operation, reused on every retry (16..64 of [A-Za-z0-9_-])',
            schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{16,64}$' },
          },
        ];
      }
    }
  }
  // trpc-to-openapi also emits `error.BAD_REQUEST`-style component schemas ({message, code: "BAD_REQUEST",
  // issues}): no answer has that shape and no operation refers to them once the responses above are
  // replaced, but generated clients would still get types for them. The envelope is the only error body.
  const schemas = doc.components?.schemas as Record<string, unknown> | undefined;
  for (const name of Object.keys(schemas ?? {})) if (name.startsWith('error.')) delete schemas?.[name];
  describeAliases(doc);
  describeProbes(doc);
  describeExportFile(doc);
  // Public operations say so (security: []), and every tag used is declared once, with its meaning.
  const tags = new Set<string>();
  for (const ops of Object.values(doc.paths ?? {})) {
    for (const op of Object.values(ops as Record<string, Operation & { tags?: string[] }>)) {
      if (!op.security) op.security = [];
      for (const tag of op.tags ?? []) tags.add(tag);
    }
  }
  doc.tags = [...tags].sort().map((name) => ({ name, description: TAG_DESCRIPTIONS[name] ?? name }));
  return doc;
}
