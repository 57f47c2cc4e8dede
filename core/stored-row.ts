/**
 * A table row keyed by its column names, as the service meets it outside a model instance: read whole
 * by `SELECT *` (pg gives numeric and bigint as text, timestamptz as a Date), or the snapshot an event's
 * trigger stores (`row_to_json(NEW)`, parsed with each number as its text and a timestamptz as ISO text:
 * events/render.ts parseEventRow, models/migrations/20261128000001-events-leaner-writes.cjs).
 *
 * Each resource reads the columns its transfer object needs with these, in one function next to its
 * model (`orderFromColumns`, `paymentFromColumns`, ...): which column holds what is written once per
 * resource. A column that is missing or of another type throws, naming the column.
 */
export type StoredRow = Readonly<Record<string, unknown>>;

function unexpected(column: string, expected: string, value: unknown): TypeError {
  const got =
    value === null
      ? 'null'
      : value === undefined
        ? 'no such column'
        : typeof value === 'string'
          ? JSON.stringify(value)
          : typeof value;
  return new TypeError(`column ${column}: expected ${expected}, got ${got}`);
}

export function textColumn(row: StoredRow, column: string): string {
  const value = row[column];
  if (typeof value !== 'string') throw unexpected(column, 'text', value);
  return value;
}

export function nullableTextColumn(row: StoredRow, column: string): string | null {
  return row[column] === null ? null : textColumn(row, column);
}

/**
 * A numeric or bigint column as its text ("10.50" keeps its two decimals, an id all its digits); a
 * number is taken as `String` renders it, as the transfer objects always did.
 */
export function numericColumn(row: StoredRow, column: string): string {
  const value = row[column];
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  throw unexpected(column, 'a numeric', value);
}

export function nullableNumericColumn(row: StoredRow, column: string): string | null {
  return row[column] === null ? null : numericColumn(row, column);
}

/** A timestamptz column: a Date from pg, ISO text in an event's snapshot. */
export function timeColumn(row: StoredRow, column: string): Date {
  const value = row[column];
  if (value instanceof Date) return value;
  if (typeof value === 'string') return new Date(value);
  throw unexpected(column, 'a timestamp', value);
}

export function nullableTimeColumn(row: StoredRow, column: string): Date | null {
  return row[column] === null ? null : timeColumn(row, column);
}

/** A text column that holds one of `values` (a CHECK constraint's list). */
export function oneOfColumn<const T extends string>(row: StoredRow, column: string, values: readonly T[]): T {
  const value = row[column];
  const found = values.find((v) => v === value);
  if (found === undefined) throw unexpected(column, values.join(' | '), value);
  return found;
}
