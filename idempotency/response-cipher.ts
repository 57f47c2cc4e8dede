import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM for stored responses. The stored text is `<keyId>.<iv>.<tag>.<ciphertext>` (base64url),
 * so a key can be rotated: new writes use the current key, old records still decrypt with the
 * previous keys until they expire.
 */
export class ResponseCipher {
  private readonly keys: Map<string, Buffer>;

  constructor(
    private readonly currentId: string,
    current: Buffer,
    previous: Record<string, Buffer> = {},
  ) {
    if (current.length !== 32) throw new Error('response encryption key must be 32 bytes');
    this.keys = new Map([...Object.entries(previous), [currentId, current]]);
  }

  encrypt(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.currentId)!, iv);
    // The scope key as associated data: a record's body cannot be moved to another scope.
    cipher.setAAD(Buffer.from(aad));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      this.currentId,
      iv.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
      ct.toString('base64url'),
    ].join('.');
  }

  decrypt(stored: string, aad: string): string {
    const [keyId, iv, tag, ct] = stored.split('.');
    const key = this.keys.get(keyId);
    if (!key || iv === undefined || tag === undefined || ct === undefined) {
      throw new Error(`cannot decrypt stored response (key id ${JSON.stringify(keyId)})`);
    }
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}
