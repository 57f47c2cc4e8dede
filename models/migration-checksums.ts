import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { MIGRATIONS_DIR } from './migrate.js';

/**
 * sha256 of every migration file's bytes, committed beside them. A database records a migration by
 * name only, so an edited migration never runs again where it ran before: databases migrated before
 * and after the edit differ silently (issue 26, defect 4). The list makes an edit fail a test.
 */
export const CHECKSUMS_FILE = 'checksums.json';

export type Checksums = Record<string, string>;

async function migrationFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((f) => f.endsWith('.cjs')).sort();
}

async function fileChecksum(dir: string, name: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path.join(dir, name)))
    .digest('hex');
}

async function readChecksums(dir: string): Promise<Checksums> {
  return JSON.parse(await readFile(path.join(dir, CHECKSUMS_FILE), 'utf8')) as Checksums;
}

export interface ChecksumProblems {
  changed: string[];
  unlisted: string[];
  missing: string[];
}

export async function checkChecksums(dir = MIGRATIONS_DIR): Promise<ChecksumProblems> {
  const listed = await readChecksums(dir);
  const names = await migrationFiles(dir);
  const problems: ChecksumProblems = { changed: [], unlisted: [], missing: [] };
  for (const name of names) {
    if (!(name in listed)) problems.unlisted.push(name);
    else if (listed[name] !== (await fileChecksum(dir, name))) problems.changed.push(name);
  }
  problems.missing = Object.keys(listed).filter((name) => !names.includes(name));
  return problems;
}

/** Appends the files not listed yet; a listed entry is never rewritten. Returns the names added. */
export async function addNewChecksums(dir = MIGRATIONS_DIR): Promise<string[]> {
  const listed = await readChecksums(dir);
  const added: string[] = [];
  for (const name of await migrationFiles(dir)) {
    if (name in listed) continue;
    listed[name] = await fileChecksum(dir, name);
    added.push(name);
  }
  const sorted = Object.fromEntries(Object.entries(listed).sort(([a], [b]) => a.localeCompare(b)));
  await writeFile(path.join(dir, CHECKSUMS_FILE), `${JSON.stringify(sorted, null, 2)}\n`);
  return added;
}

export const HOW_TO_ADD = [
  'A migration that is on main is never edited (a database that ran it keeps the old text):',
  'undo the edit and add a NEW migration file (models/migrations/<timestamp>-<what>.cjs, safe to run',
  'twice: CREATE OR REPLACE, IF NOT EXISTS, DROP ... IF EXISTS), then list it (and only it) with',
  '`npx tsx scripts/migration-checksums.ts --add`.',
].join('\n');
