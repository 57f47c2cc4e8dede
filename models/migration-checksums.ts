import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { MIGRATIONS_DIR, migrationNames } from './migrate.js';

/**
 * sha256 of every migration file's bytes, committed beside them. A database records a migration by
 * name only, so an edited migration never runs again where it ran before: databases migrated before
 * and after the edit differ silently (issue 26, defect 4). The list makes an edit fail a test.
 */
export const CHECKSUMS_FILE = path.join(MIGRATIONS_DIR, 'checksums.json');

export type Checksums = Record<string, string>;

export async function fileChecksum(name: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path.join(MIGRATIONS_DIR, name)))
    .digest('hex');
}

export async function readChecksums(): Promise<Checksums> {
  return JSON.parse(await readFile(CHECKSUMS_FILE, 'utf8')) as Checksums;
}

export interface ChecksumProblems {
  changed: string[];
  unlisted: string[];
  missing: string[];
}

export async function checkChecksums(): Promise<ChecksumProblems> {
  const listed = await readChecksums();
  const names = await migrationNames();
  const problems: ChecksumProblems = { changed: [], unlisted: [], missing: [] };
  for (const name of names) {
    if (!(name in listed)) problems.unlisted.push(name);
    else if (listed[name] !== (await fileChecksum(name))) problems.changed.push(name);
  }
  problems.missing = Object.keys(listed).filter((name) => !names.includes(name));
  return problems;
}

/** Appends the files not listed yet; a listed entry is never rewritten. Returns the names added. */
export async function addNewChecksums(): Promise<string[]> {
  const listed = await readChecksums();
  const added: string[] = [];
  for (const name of await migrationNames()) {
    if (name in listed) continue;
    listed[name] = await fileChecksum(name);
    added.push(name);
  }
  const sorted = Object.fromEntries(Object.entries(listed).sort(([a], [b]) => a.localeCompare(b)));
  await writeFile(CHECKSUMS_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
  return added;
}

export const HOW_TO_ADD = [
  'A migration that is on main is never edited (a database that ran it keeps the old text):',
  'undo the edit and add a NEW migration file (models/migrations/<timestamp>-<what>.cjs, safe to run',
  'twice: CREATE OR REPLACE, IF NOT EXISTS, DROP ... IF EXISTS), then list it (and only it) with',
  '`npx tsx scripts/migration-checksums.ts --add`.',
].join('\n');
