import type { Sequelize } from 'sequelize';
import { type Allocated, sqlRows } from '../core/sql.js';

/** How many ids one round trip takes from a sequence. */
export const ID_BLOCK_SIZE = 64;

/**
 * New rows' ids taken from their table's own sequence ahead of time, a block of them per round trip
 * (the pooled / hi-lo scheme of ORMs): a keyed create then knows its answer before anything is sent,
 * and sends its whole work as one statement (idempotency/engine.ts runAtOnce). Every id is a value of
 * the sequence, so it is unique whatever the number of instances; ids are not in creation order
 * across instances, and ids that no row got are never used again: those a process held when it
 * stopped, and that of a keyed request that turned out to be a replay or was refused (gaps, as a
 * rolled-back INSERT leaves). Within one process they are handed out in increasing order.
 */
export class IdBlocks {
  private readonly free = new Map<string, string[]>();
  private readonly filling = new Map<string, Promise<void>>();

  constructor(
    private readonly sequelize: Sequelize,
    private readonly blockSize = ID_BLOCK_SIZE,
  ) {}

  /** A new id of `sequence` and the time of the create (this process's clock, to the millisecond). */
  async take(sequence: string): Promise<Allocated> {
    for (;;) {
      const id = this.free.get(sequence)?.pop();
      if (id !== undefined) return { id, at: new Date() };
      await this.fill(sequence);
    }
  }

  /** One round trip for a block; concurrent takers of an empty sequence wait for the same one. */
  private fill(sequence: string): Promise<void> {
    let pending = this.filling.get(sequence);
    if (!pending) {
      pending = this.takeBlock(sequence).finally(() => this.filling.delete(sequence));
      this.filling.set(sequence, pending);
    }
    return pending;
  }

  private async takeBlock(sequence: string): Promise<void> {
    const rows = await sqlRows<{ id: string }>(
      this.sequelize,
      'SELECT nextval($1::regclass)::text AS id FROM generate_series(1, $2)',
      [sequence, this.blockSize],
    );
    // Taken from the end (pop): the block's lowest id first.
    const ids = rows.map((r) => r.id).sort((a, b) => (BigInt(a) < BigInt(b) ? 1 : -1));
    this.free.set(sequence, [...(this.free.get(sequence) ?? []), ...ids]);
  }
}
