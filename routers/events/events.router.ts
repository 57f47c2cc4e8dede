import { ok } from '../../core/envelope.js';
import { authedProcedure, router } from '../trpc.js';
import { eventStream, listEvents, startPosition } from './events.handlers.js';
import { eventPageEnvelope, listEventsInput, onEventInput } from './events.schema.js';

const tags = ['events'];

export const eventsRouter = router({
  list: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/events',
        tags,
        summary: 'The event feed (admin: tenant; user: own resources), in feed order after a cursor',
      },
    })
    .input(listEventsInput)
    .output(eventPageEnvelope)
    .query(async ({ ctx, input }) => ok(await listEvents(ctx.services.sequelize, ctx.auth, input))),

  /**
   * Over SSE only (`GET /trpc/events.onEvent?input=<JSON>`, tRPC's httpSubscriptionLink): not a
   * REST route, so not in the OpenAPI document (README "Events").
   */
  onEvent: authedProcedure.input(onEventInput).subscription(async ({ ctx, input, signal }) => {
    const { sequelize } = ctx.services;
    const start = await startPosition(sequelize, input);
    return eventStream(
      sequelize,
      ctx.auth,
      start,
      input?.types,
      signal ?? new AbortController().signal,
      ctx.services.config.EVENT_MAX_SUBSCRIBERS,
    );
  }),
});
