import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type EmbeddedDatabase, startEmbeddedPostgres } from '../../core/embedded-postgres.js';
import { killAll } from '../support/processes.js';
import { stopSharedServer } from '../support/server.js';
import { stablePort } from '../support/stable-port.js';

/**
 * Mocha root hooks: one PostgreSQL for the whole run.
 * - DATABASE_URL unset (the README path): a throw-away embedded PostgreSQL.
 * - DATABASE_URL set (CI's second pass): a fresh database created on that server and dropped after.
 * The resulting URL is exported as TEST_DATABASE_URL for in-process servers and child processes.
 */
let embedded: EmbeddedDatabase | undefined;
let dropUrl: { admin: string; name: string } | undefined;

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(120000);
    if (process.env.TEST_DATABASE_URL) return;
    const external = process.env.DATABASE_URL;
    if (external) {
      const name = `idem_test_${randomBytes(4).toString('hex')}`;
      const admin = new pg.Client(external);
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
      await admin.end();
      dropUrl = { admin: external, name };
      const url = new URL(external);
      url.pathname = `/${name}`;
      process.env.TEST_DATABASE_URL = url.toString();
    } else {
      embedded = await startEmbeddedPostgres({ port: await stablePort() });
      process.env.TEST_DATABASE_URL = embedded.url;
    }
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60000);
    await killAll();
    await stopSharedServer();
    if (dropUrl) {
      const admin = new pg.Client(dropUrl.admin);
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${dropUrl.name} WITH (FORCE)`);
      await admin.end();
    }
    await embedded?.stop();
  },
};
