import pg from 'pg';

/** A database of its own on a PostgreSQL server, dropped (with its connections) afterwards. */
export async function scratchDatabase(
  serverUrl: string,
  name: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = async (sql: string) => {
    const client = new pg.Client(serverUrl);
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  const safe = name.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  await admin(`DROP DATABASE IF EXISTS ${safe} WITH (FORCE)`);
  await admin(`CREATE DATABASE ${safe}`);
  const url = new URL(serverUrl);
  url.pathname = `/${safe}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${safe} WITH (FORCE)`) };
}
