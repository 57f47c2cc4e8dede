import express, { type Router } from 'express';
import { MethodNotAllowed, ServiceUnavailable } from '../core/errors.js';
import { migrationsApplied } from '../models/migrate.js';
import type { Services } from '../routers/context.js';
import { sendError } from './http-errors.js';

export function healthRouter(services: Services): Router {
  const r = express.Router({ strict: true });
  r.get('/healthz', (_req, res) => {
    res.json({ code: 200, message: 'Success', data: { status: 'ok' } });
  });
  r.get('/readyz', async (_req, res) => {
    try {
      await services.sequelize.query('SELECT 1');
      if (!(await migrationsApplied(services.sequelize))) {
        return sendError(res, new ServiceUnavailable('Migrations not applied', 5));
      }
      res.json({ code: 200, message: 'Success', data: { status: 'ok' } });
    } catch {
      sendError(res, new ServiceUnavailable('Database unreachable', 5));
    }
  });
  // Known paths: another method is a 405 with Allow (CONTRACT section 3), not the 404 fallback.
  r.all(['/healthz', '/readyz'], (_req, res) => sendError(res, new MethodNotAllowed(['GET'])));
  return r;
}
