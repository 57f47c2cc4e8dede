import { generateOpenApiDocument, type OpenAPIObject } from 'trpc-to-openapi';
import type { AppRouter } from '../routers/index.js';

const errorEnvelope = {
  type: 'object',
  required: ['code', 'message', 'data'],
  properties: { code: { type: 'integer' }, message: { type: 'string' }, data: { type: 'null' } },
  additionalProperties: false,
};

const ERROR_DESCRIPTIONS: Record<string, string> = {
  '400': 'Validation failure, malformed JSON, bad Idempotency-Key or bad path id',
  '401': 'Missing, invalid or expired token',
  '403': 'Not allowed',
  '404': 'No such resource',
  '405': 'Method not allowed on this path',
  '409': 'Conflict (40901 key reused, 40902 business key reused, 40903 state, 40904 unique field)',
  '413': 'Body too large',
  '415': 'Body is not application/json',
  '429': 'Idempotency limits (42901 in flight, 42902 retained)',
  '500': 'Internal server error',
  '503': 'Database or payment gateway unavailable; retry with the same key',
};

interface ProcMeta {
  successStatus?: number;
  openapi?: { method: string; path: string };
}

/**
 * The OpenAPI document is generated from the procedures; this only corrects what trpc-to-openapi
 * cannot know: the real success status (201/204) and the envelope shape of every error.
 */
export function buildOpenApiDocument(router: AppRouter, baseUrl: string): OpenAPIObject {
  const doc = generateOpenApiDocument(router, {
    title: 'Idempotent service',
    version: '1.0.0',
    baseUrl,
    description: 'Users, orders and payments with exactly-once mutating operations. See README.',
    securitySchemes: { Authorization: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
  });
  const metaByRoute = new Map<string, ProcMeta>();
  for (const proc of Object.values(router._def.procedures) as unknown as Array<{
    _def: { meta?: ProcMeta };
  }>) {
    const meta = proc._def.meta;
    if (meta?.openapi) metaByRoute.set(`${meta.openapi.method.toLowerCase()} ${meta.openapi.path}`, meta);
  }
  for (const [path, ops] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(
      ops as Record<string, { responses: Record<string, unknown> }>,
    )) {
      const meta = metaByRoute.get(`${method} ${path}`);
      const responses: Record<string, unknown> = {};
      for (const [status, response] of Object.entries(op.responses)) {
        if (status === '200') {
          const success = meta?.successStatus ?? 200;
          responses[String(success)] = success === 204 ? { description: 'No content' } : response;
        } else if (status !== 'default') {
          responses[status] = {
            description: ERROR_DESCRIPTIONS[status] ?? 'Error',
            content: { 'application/json': { schema: errorEnvelope } },
          };
        }
      }
      for (const status of ['400', '404', '405', '500']) {
        responses[status] ??= {
          description: ERROR_DESCRIPTIONS[status],
          content: { 'application/json': { schema: errorEnvelope } },
        };
      }
      op.responses = responses;
    }
  }
  return doc;
}
