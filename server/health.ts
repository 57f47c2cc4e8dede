import express, { type Router } from 'express';
import { MethodNotAllowed, ServiceUnavailable } from '../core/errors.js';
import { migrationsApplied } from '../models/migrate.js';
import type { Services } from '../routers/context.js';
import { sendError, writeJson } from './http-errors.js';

const OK = { code: 200, message: 'Success', data: { status: 'ok' } };

export function healthRouter(services: Services): Router {
  const r = express.Router({ strict: true });
  r.get('/healthz', (_req, res) => writeJson(res, 200, {}, OK));
  r.get('/readyz', async (_req, res) => {
    try {
      await services.sequelize.query('SELECT 1');
      if (!(await migrationsApplied(services.sequelize))) {
        return sendError(res, new ServiceUnavailable('Migrations not applied', 5));
      }
      writeJson(res, 200, {}, OK);
    } catch {
      sendError(res, new ServiceUnavailable('Database unreachable', 5));
    }
  });
  // Known paths: another method is a 405 with Allow (CONTRACT section 3), not the 404 fallback.
  r.all(['/healthz', '/readyz'], (_req, res) => sendError(res, new MethodNotAllowed(['GET'])));
  return r;
}
