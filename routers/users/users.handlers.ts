import type { Transaction } from 'sequelize';
import { rethrowUnique, uniqueAsConflict } from '../../core/db-errors.js';
import { Forbidden, NotFound } from '../../core/errors.js';
import type { Identity } from '../../core/identity.js';
import { type Allocated, onlyRow } from '../../core/sql.js';
import { type NewUser, User, type UserCheck, type UserRow } from '../../models/user.js';
import { hashPassword } from '../auth/password.js';
import { refusedBecause } from '../auth/who.js';
import type { BusinessStatement } from '../idempotent-mutation.js';
import type { CreateUserInput, ReplaceUserInput, UpdateUserInput, UserDto } from './users.schema.js';

const UNIQUE = { users_tenant_username_key: 'username', users_tenant_email_key: 'email' };

export function toUserDto(u: UserRow): UserDto {
  return {
    id: String(u.id),
    name: u.name,
    age: u.age,
    username: u.username,
    email: u.email,
    role: u.role,
    status: u.status,
    createdAt: u.createdAt.toISOString(),
    updatedAt: u.updatedAt.toISOString(),
  };
}

export const userLocation = (id: string) => `/api/v1/users/${id}`;

async function loadForWrite(auth: Identity, id: string, tx?: Transaction): Promise<User> {
  // Row lock: concurrent PUT/PATCH of one user apply one after the other, never interleaved.
  const user = await User.findOne({
    where: { tenantId: auth.tenantId, id },
    transaction: tx,
    lock: tx ? true : undefined,
  });
  if (!user) throw new NotFound('User not found');
  return user;
}

/** The row a create writes (the password hashed first: the one slow step, outside any transaction). */
async function newUser(auth: Identity, input: CreateUserInput): Promise<NewUser> {
  const password = input.password ? await hashPassword(input.password) : undefined;
  return {
    tenantId: auth.tenantId,
    name: input.name,
    age: input.age,
    username: input.username ?? null,
    email: input.email ?? null,
    passwordHash: password?.hash ?? null,
    passwordSalt: password?.salt ?? null,
    role: input.role,
    // Not a field of the create (CONTRACT section 3: an unknown body field, 400): PUT .../status sets it.
    status: 'ACTIVE',
  };
}

/** The create's row written by `insert`, as the answer (a taken username or email: 409). */
async function insertUser(
  auth: Identity,
  input: CreateUserInput,
  insert: (row: NewUser) => Promise<UserRow | undefined>,
): Promise<UserDto | undefined> {
  const row = await newUser(auth, input);
  try {
    const inserted = await insert(row);
    return inserted && toUserDto(inserted);
  } catch (err) {
    rethrowUnique(err, UNIQUE);
  }
}

export async function createUser(auth: Identity, input: CreateUserInput, tx?: Transaction): Promise<UserDto> {
  const user = await insertUser(auth, input, (row) => User.insertRow(row, tx));
  if (!user) throw new Error('INSERT INTO users returned no row');
  return user;
}

/**
 * Hashing a password is the one slow step (scrypt): a request the user row refuses (DISABLED, or a
 * demoted admin) gets its 403 before it, so such tokens make the service spend no scrypt time
 * (CONTRACT section 5). With a password, the row is read first (one round trip, against scrypt's
 * cost); the write still checks it again in its own statement.
 */
async function checkedBeforeHashing(
  auth: Identity,
  input: CreateUserInput,
  check?: UserCheck,
): Promise<void> {
  if (input.password && check) await refusedBecause(User.sequelize!, auth, check.adminOnly);
}

/** The same create, only where `check` admits it in the same statement (undefined when it did not). */
export async function createUserChecked(
  auth: Identity,
  input: CreateUserInput,
  check: UserCheck,
): Promise<UserDto | undefined> {
  await checkedBeforeHashing(auth, input, check);
  return insertUser(auth, input, (row) => User.insertChecked(row, check));
}

/**
 * The same create as one statement, for a keyed request (sent with the claim). With an allocated id
 * and time the row is written with them, and its answer is known before the write. With a password
 * the user row and the key's record were read first (the definition's `readFirst`), so the hash
 * below comes after the user check and is never made for a replay.
 */
export async function createUserStatement(
  auth: Identity,
  input: CreateUserInput,
  allocated?: Allocated,
): Promise<BusinessStatement<UserDto>> {
  const row = await newUser(auth, input);
  return {
    sql: (guard) => User.insertGuarded(row, guard, allocated),
    result: (rows) => toUserDto(onlyRow<UserRow>(rows, 'users')),
    error: (err) => uniqueAsConflict(err, UNIQUE),
    ...(allocated && {
      answer: toUserDto({ ...row, id: allocated.id, createdAt: allocated.at, updatedAt: allocated.at }),
    }),
  };
}

export async function getUser(auth: Identity, id: string): Promise<UserDto> {
  if (auth.role !== 'admin' && auth.userId !== id) {
    // Another tenant's row is never looked at (404 below); inside the tenant a stranger gets 403
    // only when the row exists, so ids are not confirmed to non-admins by a different status.
    const exists = await User.findInTenant(auth.tenantId, id);
    if (!exists) throw new NotFound('User not found');
    throw new Forbidden('Not allowed to read this user');
  }
  const user = await User.findInTenant(auth.tenantId, id);
  if (!user) throw new NotFound('User not found');
  return toUserDto(user);
}

export async function listUsers(
  auth: Identity,
  page: number,
  size: number,
): Promise<{ items: UserDto[]; total: number }> {
  const { rows, count } = await User.findAndCountAll({
    where: { tenantId: auth.tenantId },
    order: [['id', 'ASC']],
    limit: size,
    offset: (page - 1) * size,
  });
  return { items: rows.map(toUserDto), total: count };
}

async function save(user: User, tx?: Transaction): Promise<UserDto> {
  try {
    await user.save({ transaction: tx });
    return toUserDto(user);
  } catch (err) {
    rethrowUnique(err, UNIQUE);
  }
}

export async function replaceUser(
  auth: Identity,
  input: ReplaceUserInput,
  tx?: Transaction,
): Promise<UserDto> {
  const user = await loadForWrite(auth, input.id, tx);
  user.set({ name: input.name, age: input.age, username: input.username, email: input.email });
  user.changed('updatedAt', true);
  return save(user, tx);
}

export async function updateUser(auth: Identity, input: UpdateUserInput, tx?: Transaction): Promise<UserDto> {
  if (auth.role !== 'admin' && auth.userId !== input.id) {
    await loadForWrite(auth, input.id, tx);
    throw new Forbidden('Not allowed to change this user');
  }
  const user = await loadForWrite(auth, input.id, tx);
  if (input.name !== undefined) user.name = input.name;
  if (input.age !== undefined) user.age = input.age;
  if (input.email !== undefined) user.email = input.email;
  user.changed('updatedAt', true);
  return save(user, tx);
}

export async function setUserStatus(
  auth: Identity,
  id: string,
  status: User['status'],
  tx?: Transaction,
): Promise<UserDto> {
  const user = await loadForWrite(auth, id, tx);
  if (user.status !== status) {
    user.status = status;
    return save(user, tx);
  }
  return toUserDto(user);
}

export async function deleteUser(auth: Identity, id: string, tx?: Transaction): Promise<void> {
  const deleted = await User.destroy({ where: { tenantId: auth.tenantId, id }, transaction: tx });
  if (deleted === 0) throw new NotFound('User not found');
}
