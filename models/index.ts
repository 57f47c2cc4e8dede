import type { Sequelize } from 'sequelize';
import { User } from './user.js';

export { User };

let initialised: Sequelize | undefined;

/** Binds every model to the process's Sequelize instance, once. */
export function initModels(sequelize: Sequelize): void {
  if (initialised === sequelize) return;
  User.initModel(sequelize);
  initialised = sequelize;
}
