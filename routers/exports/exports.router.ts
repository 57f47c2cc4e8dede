import { ok } from '../../core/envelope.js';
import { idempotentMutation } from '../idempotent-mutation.js';
import { authedProcedure, router } from '../trpc.js';
import { acceptExport, exportAccepted, getExport } from './exports.handlers.js';
import { createExportInput, exportEnvelope, getExportInput } from './exports.schema.js';

const tags = ['exports'];

export const exportsRouter = router({
  create: idempotentMutation({
    openapi: {
      method: 'POST',
      path: '/api/v1/exports',
      tags,
      summary: 'Start an export (202; poll Location, then GET its /file)',
    },
    key: 'required',
    // The answer is the stored 202 (a task id), not a run of the lease protocol: Mode A's record.
    mode: 'external',
    success: exportAccepted,
    input: createExportInput,
    output: exportEnvelope,
    execute: ({ ctx, input, request }) => acceptExport(ctx, input, request),
  }),

  get: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/exports/{id}',
        tags,
        summary: 'Get an export (its status; the file is at /file once SUCCEEDED)',
      },
    })
    .input(getExportInput)
    .output(exportEnvelope)
    .query(async ({ ctx, input }) => ok(await getExport(ctx, input.id))),
});
