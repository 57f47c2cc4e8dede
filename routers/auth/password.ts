import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scryptAsync = promisify(scrypt) as (password: string, salt: string, keylen: number) => Promise<Buffer>;
const KEY_LENGTH = 64;

/** Passwords hashed by this process: the user check must come first (test/api/password-secret.test.ts counts). */
let hashed = 0;
export const passwordsHashed = (): number => hashed;

export async function hashPassword(password: string): Promise<{ hash: string; salt: string }> {
  hashed += 1;
  const salt = randomBytes(16).toString('hex');
  const hash = (await scryptAsync(password, salt, KEY_LENGTH)).toString('hex');
  return { hash, salt };
}

/**
 * Constant-time comparison. Called with a dummy hash when the user does not exist, so that the
 * answer time does not reveal which usernames exist.
 */
export async function verifyPassword(password: string, salt: string, hash: string): Promise<boolean> {
  const actual = await scryptAsync(password, salt, KEY_LENGTH);
  const expected = Buffer.from(hash, 'hex');
  return expected.length === actual.length && timingSafeEqual(actual, expected);
}
