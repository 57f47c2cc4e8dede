import type { Model } from 'sequelize';
import type { InsertShape } from '../core/sql.js';

/**
 * A row's createdAt and updatedAt come from one source, the service's clock: every create passes its
 * time (the insert below, idem_execute's allocated time, user_insert_checked's p_at), none takes the
 * database's default now(). Instances' clocks may differ (skew), so a row created by one instance and
 * updated by another could show updatedAt < createdAt: every update writes at least createdAt.
 * Bound: createdAt is the creating instance's clock; updatedAt is max(the updating instance's clock,
 * createdAt), so updatedAt >= createdAt always, and both are off true time by at most the skew of
 * the instance that wrote them.
 */
export function timed(shape: InsertShape): InsertShape {
  return {
    ...shape,
    columns: [...shape.columns, ['created_at', 'timestamptz'], ['updated_at', 'timestamptz']],
  };
}

/** Sequelize's beforeUpdate hook (it has set updatedAt to this instance's clock by then). */
export function notBeforeCreated(row: Model): void {
  const created = row.getDataValue('createdAt') as Date | undefined;
  const updated = row.getDataValue('updatedAt') as Date | undefined;
  if (created && updated && updated < created) row.setDataValue('updatedAt', created);
}
