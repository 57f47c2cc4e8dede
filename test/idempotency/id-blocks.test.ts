// New rows' ids taken ahead from their sequence in blocks (models/id-blocks.ts), for keyed creates
// sent as one statement: unique across processes, increasing within one, one round trip per block.
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { createSequelize } from '../../core/database.js';
import { IdBlocks } from '../../models/id-blocks.js';
import { callsDuring, isIdBlock } from '../support/queries.js';
import { sharedServer } from '../support/server.js';

describe('id blocks (models/id-blocks.ts)', () => {
  it('when two processes take ids of one sequence at once, then every id is unique, each process hands its out in increasing order, and a block of 8 costs one round trip', async function () {
    this.timeout(20000);
    await sharedServer(); // the migrated database
    const url = process.env.TEST_DATABASE_URL ?? '';
    const bounds = { waitMs: 1000, leaseMs: 30000 };
    const [a, b] = [createSequelize(url, 4, bounds), createSequelize(url, 4, bounds)];
    try {
      const blocksA = new IdBlocks(a, 8);
      const blocksB = new IdBlocks(b, 8);
      let fromA: string[] = [];
      const calls = await callsDuring(async () => {
        // 20 concurrent takers on an empty process: they share its round trips (3 blocks of 8).
        fromA = (await Promise.all(Array.from({ length: 20 }, () => blocksA.take('orders_id_seq')))).map(
          (x) => x.id,
        );
      });
      expect(calls.filter((c) => isIdBlock(c.text))).to.have.length(3);
      const fromB: string[] = [];
      for (let i = 0; i < 20; i++) fromB.push((await blocksB.take('orders_id_seq')).id);
      const all = [...fromA, ...fromB];
      expect(new Set(all).size).to.equal(40);
      for (const ids of [fromA, fromB]) {
        const numbers = ids.map(BigInt);
        for (let i = 1; i < numbers.length; i++)
          expect(numbers[i] > numbers[i - 1], ids.join(',')).to.equal(true);
      }
      // Every id is a value the sequence gave: none is past its last value.
      const [seq] = await a.query<{ last: string }>('SELECT last_value::text AS last FROM orders_id_seq', {
        type: QueryTypes.SELECT,
      });
      for (const id of all) expect(BigInt(id) <= BigInt(seq.last)).to.equal(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('when a taken id comes with its time, then the time is now to the millisecond (the create answers it as stored)', async () => {
    const { services } = await sharedServer();
    const blocks = new IdBlocks(services.sequelize, 4);
    const before = Date.now();
    const { at } = await blocks.take('users_id_seq');
    expect(at.getTime()).to.be.at.least(before).and.at.most(Date.now());
  });
});
