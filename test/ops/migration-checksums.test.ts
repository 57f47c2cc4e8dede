import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { MIGRATIONS_DIR } from '../../models/migrate.js';
import { addNewChecksums, checkChecksums, HOW_TO_ADD } from '../../models/migration-checksums.js';

/**
 * A database records a migration by its name, never its text: an edited migration never runs again
 * where it ran before (issue 26, defect 4: two were). Each file is compared with its committed sha256.
 */
describe('migration files are never edited (models/migrations/checksums.json)', () => {
  it('when the migrations folder is read, then every migration file is listed with its current checksum and nothing listed is missing', async () => {
    const problems = await checkChecksums();
    expect(problems, `\n${JSON.stringify(problems, null, 2)}\n${HOW_TO_ADD}`).to.deep.equal({
      changed: [],
      unlisted: [],
      missing: [],
    });
  });

  describe('on a copy of the folder', () => {
    let dir: string;
    beforeEach(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'migrations-'));
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
    });
    afterEach(() => rm(dir, { recursive: true, force: true }));

    it('when a listed migration gains one byte, then it is reported changed', async () => {
      const name = '20261125000003-keyed-create-at-once.cjs';
      await writeFile(path.join(dir, name), '\n', { flag: 'a' });
      expect((await checkChecksums(dir)).changed).to.deep.equal([name]);
    });

    it('when a new migration file is added, then it is reported unlisted until --add lists it (and only it), an edited one staying reported', async () => {
      const edited = '20261121000001-create-users.cjs';
      await writeFile(path.join(dir, edited), '\n', { flag: 'a' });
      const name = '20261126999999-new.cjs';
      await writeFile(path.join(dir, name), "'use strict';\n");
      expect((await checkChecksums(dir)).unlisted).to.deep.equal([name]);
      expect(await addNewChecksums(dir)).to.deep.equal([name]);
      expect(await checkChecksums(dir)).to.deep.equal({ changed: [edited], unlisted: [], missing: [] });
    });
  });
});
