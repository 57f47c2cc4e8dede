import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import {
  DomainError,
  NotFound,
  PayloadTooLarge,
  UnsupportedMediaType,
  ValidationError,
} from '../core/errors.js';
import { errorAnswer } from '../routers/error-answer.js';

/** An error answered outside the procedures (routing, body reading), from the same error table. */
export function sendError(res: Response, err: unknown): void {
  const answer = errorAnswer(err);
  res.status(answer.status).set(answer.headers).json(answer.body);
}

export function notFoundHandler(_req: Request, res: Response): void {
  sendError(res, new NotFound('No such path'));
}

/**
 * Any other 400 from the body reader (e.g. `Content-Encoding: gzip` over bytes that are not gzip: a
 * zlib error without a body-parser `type`) is the client's fault, not a 500.
 */
function isClientBodyError(err: unknown): boolean {
  const e = err as { status?: unknown; expose?: unknown } | null;
  return e?.status === 400 && e.expose === true;
}

/** Body-parser failures become their contract statuses; anything else is a generic 500. */
export function errorHandler(logger: Logger, limit: number) {
  return (err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (err as { type?: string })?.type;
    let mapped: unknown = err;
    if (type === 'entity.too.large') mapped = new PayloadTooLarge(limit);
    else if (type === 'entity.parse.failed') mapped = new ValidationError('body', 'malformed JSON');
    else if (type === 'charset.unsupported' || type === 'encoding.unsupported')
      mapped = new UnsupportedMediaType();
    else if (type === 'request.aborted') mapped = new ValidationError('body', 'request aborted');
    else if (isClientBodyError(err)) mapped = new ValidationError('body', 'could not be read');
    else if (!(err instanceof DomainError)) logger.error({ err }, 'unhandled error');
    if (res.headersSent) return;
    sendError(res, mapped);
  };
}
