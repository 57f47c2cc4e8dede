import type { Context } from '../routers/context.js';

/** A 201 that created an addressable resource: status and canonical Location (CONTRACT section 7). */
export function created(ctx: Context, location?: string, resourceId?: string): void {
  ctx.response.status = 201;
  if (location) ctx.response.headers.Location = location;
  if (resourceId) ctx.response.resourceId = resourceId;
}

export function noContent(ctx: Context): void {
  ctx.response.status = 204;
}
