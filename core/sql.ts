import type { ClientBase, QueryResult, QueryResultRow } from 'pg';
import type { Sequelize, Transaction } from 'sequelize';

/**
 * A statement of the hot path, sent on Sequelize's pooled `pg` client directly: the same pool, the
 * same connections and transactions, without Sequelize's per-query work around it (option merging,
 * a retry wrapper, bind-parameter rewriting, hooks, result shaping with lodash): about a tenth of the
 * service's CPU on a create (docs/BENCHMARKS.md). Sequelize stays for models, migrations and
 * transactions; only statements the code writes as SQL anyway go this way.
 *
 * Errors are the driver's own (a `DatabaseError` with the SQLSTATE `code`), not Sequelize's wrappers:
 * core/db-errors.ts reads both. `values` are `$n` parameters; without values the text may hold
 * several statements (a simple query), and the rows of all of them are returned in order.
 */
export async function sqlRows<R extends QueryResultRow>(
  sequelize: Sequelize,
  text: string,
  values?: readonly unknown[],
  transaction?: Transaction,
): Promise<R[]> {
  const results = await sqlResults<R>(sequelize, text, values, transaction);
  return results.length === 1 ? results[0].rows : results.flatMap((r) => r.rows);
}

/** Every statement's result, in order (a multi-statement simple query has one per statement). */
export async function sqlResults<R extends QueryResultRow>(
  sequelize: Sequelize,
  text: string,
  values: readonly unknown[] | undefined,
  transaction: Transaction | undefined,
): Promise<Array<QueryResult<R>>> {
  const run = async (client: ClientBase) => {
    // A multi-statement simple query answers with one result per statement.
    const result: QueryResult<R> | Array<QueryResult<R>> = await client.query<R>(
      text,
      values ? [...values] : undefined,
    );
    return Array.isArray(result) ? result : [result];
  };
  if (transaction) return run(clientOf(transaction));
  const manager = sequelize.connectionManager;
  // The pool's own acquire, bounded by its `acquire` timeout (core/database.ts).
  const client = await manager.getConnection({ type: 'write' });
  try {
    return await run(client as ClientBase);
  } finally {
    manager.releaseConnection(client);
  }
}

/**
 * The pooled client a Sequelize transaction runs on: Sequelize 6 sets `connection` when the
 * transaction takes it from the pool (lib/transaction.js prepareEnvironment); its type declarations
 * leave it out.
 */
function clientOf(transaction: Transaction): ClientBase {
  const { connection, finished } = transaction as Transaction & {
    connection?: ClientBase;
    finished?: string;
  };
  if (finished) throw new Error(`Transaction already ${finished}: no statement may run on it`);
  if (!connection) throw new Error('Transaction has no connection');
  return connection;
}

/**
 * A value as an SQL literal, for the statements that share a multi-statement round trip (a simple
 * query cannot carry parameters). Strings as Sequelize's `escape` writes them for PostgreSQL (quotes
 * doubled, standard_conforming_strings; a NUL, which text cannot hold, as the two characters `\0`),
 * dates as an ISO 8601 instant, without going through Sequelize and moment on every value.
 */
export function sqlLiteral(value: SqlValue): string {
  if (value === null) return 'NULL';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`not a finite number: ${value}`);
    return String(value);
  }
  if (value instanceof Date) return `'${value.toISOString()}'`;
  return `'${value.replace(/'/g, "''").replace(/\0/g, '\\0')}'`;
}

/** What a statement here carries: text, numbers, instants, NULL. */
export type SqlValue = string | number | Date | null;

/** An INSERT ... RETURNING of one row, written once for both forms below. */
export interface InsertShape {
  table: string;
  /** Each column with its SQL type: a literal in INSERT ... SELECT is cast to it (it would be text). */
  columns: ReadonlyArray<readonly [name: string, type: string]>;
  returning: string;
}

const columnList = (shape: InsertShape) => shape.columns.map(([name]) => name).join(', ');

/** The INSERT with `$1..$n` parameters (the values in the order of `columns`). */
export function insertWithParameters(shape: InsertShape): string {
  const params = shape.columns.map((_, i) => `$${i + 1}`).join(', ');
  return `INSERT INTO ${shape.table} (${columnList(shape)}) VALUES (${params}) RETURNING ${shape.returning}`;
}

/** One row inserted with parameters, and the one row it returned. */
export async function insertOne<R>(
  sequelize: Sequelize,
  shape: InsertShape,
  values: readonly SqlValue[],
  transaction?: Transaction,
): Promise<R> {
  const rows = await sqlRows(sequelize, insertWithParameters(shape), values, transaction);
  return onlyRow<R>(rows, shape.table);
}

/**
 * The same INSERT with literal values, inserting only where `guard` (an SQL condition) holds: for a
 * multi-statement round trip, whose statements cannot take parameters or see each other's results.
 */
export function insertGuarded(shape: InsertShape, values: readonly SqlValue[], guard: string): string {
  if (values.length !== shape.columns.length) throw new Error(`${shape.table}: ${values.length} values`);
  const literals = values.map((v, i) => `${sqlLiteral(v)}::${shape.columns[i][1]}`).join(', ');
  return `INSERT INTO ${shape.table} (${columnList(shape)}) SELECT ${literals}
     WHERE ${guard} RETURNING ${shape.returning};`;
}

/**
 * A new row's id and time, taken before its write (routers/auth/who.ts readUser allocates them with
 * the auth read of a keyed create): its answer is then known before the INSERT, and the record's
 * final state can ride in the same round trip as the INSERT and the claim.
 */
export interface Allocated {
  /** The id, from the table's own sequence (nextval). */
  id: string;
  /** The database's time of the allocation, to the millisecond (as the answer shows it). */
  at: Date;
}

/** `shape` with the id and both timestamps written by the INSERT instead of the table's defaults. */
export function withAllocated(shape: InsertShape): InsertShape {
  return {
    ...shape,
    columns: [
      ...shape.columns,
      ['id', 'bigint'],
      ['created_at', 'timestamptz'],
      ['updated_at', 'timestamptz'],
    ],
  };
}

/** The values of `withAllocated(shape)`: the row's own, then the id and the time (twice). */
export const allocatedValues = (values: readonly SqlValue[], allocated: Allocated): SqlValue[] => [
  ...values,
  allocated.id,
  allocated.at,
  allocated.at,
];

/** The one row an INSERT ... RETURNING gave back. */
export function onlyRow<R>(rows: readonly unknown[], table: string): R {
  if (rows.length !== 1) throw new Error(`INSERT INTO ${table} returned ${rows.length} rows`);
  return rows[0] as R;
}
