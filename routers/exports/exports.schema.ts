import { z } from 'zod';
import { envelopeOf, isoDate } from '../../core/envelope.js';
import { idParams } from '../params.schema.js';

export const EXPORT_RESOURCES = ['orders', 'payments'] as const;
export const EXPORT_FORMATS = ['csv', 'ndjson'] as const;
export type ExportResource = (typeof EXPORT_RESOURCES)[number];
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/**
 * An ISO 8601 date-time (with `Z` or an offset), as the createdAt of the transfer objects. A date
 * alone, or a time without a zone, is refused with a message saying so: `createdTo: "2026-01-31"`
 * read as midnight would leave out the whole of that day (docs/DECISIONS.md "Exports"). Year 0000
 * is ISO's 1 BC, which PostgreSQL's timestamptz does not read (a 500 before this check): from 0001.
 */
const instant = z.iso
  .datetime({
    offset: true,
    error: 'must be an ISO 8601 date-time with Z or an offset, e.g. 2026-01-01T00:00:00Z',
  })
  .refine((s) => !s.startsWith('0000-'), 'must be a date-time from the year 0001 on');

/** The body of POST /exports (CONTRACT section 11); unknown fields are 400 like every body. */
export const createExportInput = z
  .strictObject({
    resource: z.enum(EXPORT_RESOURCES),
    format: z.enum(EXPORT_FORMATS).default('csv'),
    createdFrom: instant.optional(),
    createdTo: instant.optional(),
  })
  .refine((v) => !v.createdFrom || !v.createdTo || Date.parse(v.createdFrom) <= Date.parse(v.createdTo), {
    message: 'must not be after createdTo',
    path: ['createdFrom'],
  });
export type CreateExportInput = z.infer<typeof createExportInput>;

/** The Export transfer object of CONTRACT section 11. */
export const exportSchema = z.object({
  id: z.string(),
  resource: z.enum(EXPORT_RESOURCES),
  format: z.enum(EXPORT_FORMATS),
  status: z.enum(['PROCESSING', 'SUCCEEDED', 'FAILED']),
  rowCount: z.number().int().nullable(),
  bytes: z.number().int().nullable(),
  failureReason: z.string().nullable(),
  createdAt: isoDate,
  completedAt: isoDate.nullable(),
  expiresAt: isoDate.nullable(),
});
export type ExportDto = z.infer<typeof exportSchema>;

export const getExportInput = idParams;
export const exportEnvelope = envelopeOf(exportSchema);
