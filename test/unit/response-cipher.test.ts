import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ResponseCipher } from '../../idempotency/response-cipher.js';

const AAD = 'tenant-a:42:orders.create:abcdefghijklmnop';
const PLAINTEXT = JSON.stringify({ s: 201, h: { Location: '/api/v1/orders/1' }, b: { note: 'Zoë ✓' } });

/** Flips one bit of one base64url part of the stored form (0 key id, 1 iv, 2 tag, 3 ciphertext). */
function tamper(stored: string, part: number): string {
  const parts = stored.split('.');
  const bytes = Buffer.from(parts[part], 'base64url');
  bytes[0] ^= 0x01;
  parts[part] = bytes.toString('base64url');
  return parts.join('.');
}

describe('unit: ResponseCipher (AES-256-GCM for stored responses)', () => {
  const key = randomBytes(32);

  it('when a response is encrypted and decrypted with the same AAD, then the plaintext comes back', () => {
    const cipher = new ResponseCipher('k1', key);
    const stored = cipher.encrypt(PLAINTEXT, AAD);
    expect(cipher.decrypt(stored, AAD)).to.equal(PLAINTEXT);
  });

  it('when a response is encrypted, then the stored text is keyId.iv.tag.ciphertext without the plaintext', () => {
    const stored = new ResponseCipher('k1', key).encrypt(PLAINTEXT, AAD);
    const parts = stored.split('.');
    expect(parts).to.have.length(4);
    expect(parts[0]).to.equal('k1');
    expect(Buffer.from(parts[1], 'base64url')).to.have.length(12);
    expect(Buffer.from(parts[2], 'base64url')).to.have.length(16);
    expect(stored).to.not.include('Location');
    expect(stored).to.not.include('orders');
  });

  it('when the same plaintext is encrypted twice, then the two stored texts differ (fresh IV)', () => {
    const cipher = new ResponseCipher('k1', key);
    expect(cipher.encrypt(PLAINTEXT, AAD)).to.not.equal(cipher.encrypt(PLAINTEXT, AAD));
  });

  it('when the IV, tag or ciphertext is tampered with, then decrypt throws', () => {
    const cipher = new ResponseCipher('k1', key);
    const stored = cipher.encrypt(PLAINTEXT, AAD);
    for (const part of [1, 2, 3]) {
      expect(() => cipher.decrypt(tamper(stored, part), AAD), `part ${part}`).to.throw();
    }
  });

  it('when the stored text is truncated, then decrypt throws', () => {
    const cipher = new ResponseCipher('k1', key);
    const stored = cipher.encrypt(PLAINTEXT, AAD);
    expect(() => cipher.decrypt(stored.split('.').slice(0, 3).join('.'), AAD)).to.throw();
    expect(() => cipher.decrypt('', AAD)).to.throw();
  });

  it('when the AAD (scope key) differs, then decrypt throws: a body cannot move to another scope', () => {
    const cipher = new ResponseCipher('k1', key);
    const stored = cipher.encrypt(PLAINTEXT, AAD);
    expect(() => cipher.decrypt(stored, `${AAD}x`)).to.throw();
    expect(() => cipher.decrypt(stored, 'tenant-b:42:orders.create:abcdefghijklmnop')).to.throw();
  });

  it('when another key with the same id decrypts, then it throws', () => {
    const stored = new ResponseCipher('k1', key).encrypt(PLAINTEXT, AAD);
    expect(() => new ResponseCipher('k1', randomBytes(32)).decrypt(stored, AAD)).to.throw();
  });

  it('when the key is rotated and the old key is passed as previous, then old records decrypt and new ones use the new id', () => {
    const oldCipher = new ResponseCipher('k1', key);
    const oldStored = oldCipher.encrypt(PLAINTEXT, AAD);
    const newKey = randomBytes(32);
    const rotated = new ResponseCipher('k2', newKey, { k1: key });
    expect(rotated.decrypt(oldStored, AAD)).to.equal(PLAINTEXT);
    const newStored = rotated.encrypt(PLAINTEXT, AAD);
    expect(newStored.startsWith('k2.')).to.equal(true);
    expect(rotated.decrypt(newStored, AAD)).to.equal(PLAINTEXT);
    // The old process cannot read the new key's records.
    expect(() => oldCipher.decrypt(newStored, AAD)).to.throw();
  });

  it('when the old key is no longer listed after a rotation, then its records no longer decrypt', () => {
    const oldStored = new ResponseCipher('k1', key).encrypt(PLAINTEXT, AAD);
    expect(() => new ResponseCipher('k2', randomBytes(32)).decrypt(oldStored, AAD)).to.throw(/k1/);
  });

  it('when the key is not 32 bytes, then the constructor refuses it', () => {
    expect(() => new ResponseCipher('k1', randomBytes(16))).to.throw(/32 bytes/);
    expect(() => new ResponseCipher('k1', randomBytes(33))).to.throw(/32 bytes/);
  });
});
