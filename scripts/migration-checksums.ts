import { addNewChecksums, checkChecksums, HOW_TO_ADD } from '../models/migration-checksums.js';

// `npx tsx scripts/migration-checksums.ts`        checks every migration file against the list
// `npx tsx scripts/migration-checksums.ts --add`  lists new migration files (never rewrites an entry)
if (process.argv.includes('--add')) {
  const added = await addNewChecksums();
  console.log(added.length ? `listed: ${added.join(', ')}` : 'no new migration file');
}
const { changed, unlisted, missing } = await checkChecksums();
for (const name of changed) console.error(`changed since listed: ${name}`);
for (const name of unlisted) console.error(`not listed: ${name}`);
for (const name of missing) console.error(`listed but missing: ${name}`);
if (changed.length + unlisted.length + missing.length > 0) {
  console.error(HOW_TO_ADD);
  process.exit(1);
}
console.log('migration checksums: ok');
