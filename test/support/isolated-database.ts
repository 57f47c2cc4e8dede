import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Sequelize } from 'sequelize';
import { createSequelize } from '../../core/database.js';

export interface IsolatedDatabase {
  url: string;
  /** A small pool of the test process on that database (raw SQL only: the models belong to the shared server). */
  sequelize: Sequelize;
  drop(): Promise<void>;
}

/**
 * A fresh database on the test server (TEST_DATABASE_URL's server), for fault tests whose instances
 * talk to a gateway of their own. Every running service runs the payment recoverer over its whole
 * database: the in-process shared server (with its bundled simulator) or another suite's instances
 * would otherwise take over expired leases and resolve them against a different gateway, and the
 * ledger a test inspects would no longer be the one the payment was charged at.
 * Instances started on `url` apply the migrations themselves.
 */
export async function createIsolatedDatabase(prefix = 'faults'): Promise<IsolatedDatabase> {
  const base = process.env.TEST_DATABASE_URL;
  if (!base) throw new Error('TEST_DATABASE_URL is not set: the mocha root hooks did not run');
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  await adminQuery(base, `CREATE DATABASE ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const sequelize = createSequelize(url.toString(), 4);
  let dropped = false;
  return {
    url: url.toString(),
    sequelize,
    async drop() {
      if (dropped) return;
      dropped = true;
      await sequelize.close();
      await adminQuery(base, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
