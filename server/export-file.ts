import type { Request, Response } from 'express';
import { Conflict, MethodNotAllowed, NotFound } from '../core/errors.js';
import { sqlRows } from '../core/sql.js';
import { appRouter } from '../routers/index.js';
import { createCallerFactory } from '../routers/trpc.js';
import type { AppServices } from './app-services.js';
import { contextFor } from './context-for.js';
import { sendError } from './http-errors.js';
import { localsOf } from './locals.js';

export const EXPORT_FILE_PATH = '/api/v1/exports/{id}/file';

const MEDIA_TYPES = { csv: 'text/csv; charset=utf-8', ndjson: 'application/x-ndjson' } as const;

/**
 * GET /api/v1/exports/{id}/file (CONTRACT section 11): the file, no envelope, streamed from its parts
 * one at a time (one part in memory, whatever the file's size; the socket's back-pressure paces the
 * reads). A plain route, not a procedure: tRPC answers JSON only. Its checks are the procedure's
 * (exports.get, called in-process: the same authentication, id validation and visibility), then the
 * file's own: 409/40903 until SUCCEEDED, 404 once expired. Errors are the envelope as everywhere.
 */
function exportFileRoute(services: AppServices) {
  const call = createCallerFactory(appRouter);
  const { sequelize, logger } = services;
  return async (req: Request, res: Response, id: string): Promise<void> => {
    localsOf(res).route = EXPORT_FILE_PATH;
    let exp: Awaited<ReturnType<ReturnType<typeof call>['exports']['get']>>['data'];
    let parts: number;
    try {
      exp = (await call(contextFor(services, req, res, undefined)).exports.get({ id })).data;
      if (exp.status !== 'SUCCEEDED') {
        throw new Conflict(
          'state_conflict',
          `Export is ${exp.status}: its file exists only once it SUCCEEDED`,
        );
      }
      if (!exp.expiresAt || Date.parse(exp.expiresAt) <= Date.now())
        throw new NotFound('Export file expired');
      const [row] = await sqlRows<{ parts: number; first: boolean }>(
        sequelize,
        `SELECT parts_written AS parts, EXISTS (SELECT 1 FROM export_parts WHERE export_id = $1 AND part_no = 1) AS first
           FROM exports WHERE id = $1`,
        [exp.id],
      );
      // Purged already (its expiry passed on the database's clock first).
      if (!row || (row.parts > 0 && !row.first)) throw new NotFound('Export file expired');
      parts = row.parts;
    } catch (err) {
      sendError(res, err);
      return;
    }
    res.status(200);
    res.setHeader('Content-Type', MEDIA_TYPES[exp.format]);
    res.setHeader('Content-Disposition', `attachment; filename="export-${exp.id}.${exp.format}"`);
    res.setHeader('Content-Length', String(exp.bytes ?? 0));
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    try {
      for (let partNo = 1; partNo <= parts; partNo++) {
        const [part] = await sqlRows<{ data: string }>(
          sequelize,
          'SELECT data FROM export_parts WHERE export_id = $1 AND part_no = $2',
          [exp.id, partNo],
        );
        if (!part) throw new Error(`export ${exp.id}: part ${partNo} is gone (purged while being sent)`);
        if (res.destroyed) return;
        if (!res.write(part.data)) await drained(res);
      }
      res.end();
    } catch (err) {
      // The status line is sent: the only way to say "incomplete" is to cut the connection.
      logger.warn({ err, exportId: exp.id }, 'export file cut short');
      res.destroy();
    }
  };
}

/** Other methods on the file's path: 405 with Allow, as on every known path. */
function exportFileOtherMethods(_req: Request, res: Response): void {
  localsOf(res).route = EXPORT_FILE_PATH;
  sendError(res, new MethodNotAllowed(['GET']));
}

/** `/{id}/file` below the mount point, on the raw (not yet decoded) path; case-insensitive, as Express's routes. */
const FILE_BELOW_EXPORTS = /^\/([^/]+)\/file$/i;

/**
 * The export file's routes, mounted at `/api/v1/exports` (GET and HEAD: the file; any other method:
 * 405). Matched on the raw path rather than as an Express route `/:id/file`: Express decodes a route's
 * parameters itself and fails on a bad percent-encoding (`%ZZ`) with a URIError, which reached the
 * error handler as a 500. Here an id that does not decode goes to the procedure as it was sent, whose
 * checks answer it as any bad id (401 without a token, then 400 naming `id`).
 */
export function exportFileRoutes(services: AppServices) {
  const file = exportFileRoute(services);
  return (req: Request, res: Response, next: (err?: unknown) => void): void => {
    const raw = FILE_BELOW_EXPORTS.exec(req.path)?.[1];
    if (raw === undefined) {
      next();
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      exportFileOtherMethods(req, res);
      return;
    }
    let id = raw;
    try {
      id = decodeURIComponent(raw);
    } catch {
      // Left as sent: not a valid id either way.
    }
    file(req, res, id).catch(next);
  };
}

/** Back-pressure: until the socket took what was written, or closed (a client gone mid-download). */
function drained(res: Response): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}
