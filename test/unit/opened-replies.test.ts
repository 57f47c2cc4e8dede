import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'chai';
import { OpenedReplies } from '../../idempotency/opened-replies.js';
import { ResponseCipher } from '../../idempotency/response-cipher.js';
import { sealReply, storedBodyJson } from '../../idempotency/stored-reply.js';

const SCOPE = 'tenant-a:42:users.create:abcdefghijklmnop';
const OTHER = 'tenant-a:42:users.create:qrstuvwxyzabcdef';

/** A cipher that counts its decryptions. */
class CountingCipher extends ResponseCipher {
  decrypted = 0;
  override decrypt(stored: string, aad: string): string {
    this.decrypted++;
    return super.decrypt(stored, aad);
  }
}

const reply = (name: string) => ({
  status: 201,
  headers: { Location: `/api/v1/users/${name}` },
  body: { code: 200, message: 'Success', data: { id: name, tags: [name] } },
});

describe('unit: OpenedReplies (replies decrypted once per sealed text)', () => {
  it('when the same sealed text is replayed again, then the reply is the same, marked, and decrypted once', () => {
    const cipher = new CountingCipher('k1', randomBytes(32));
    const opened = new OpenedReplies(cipher);
    const sealed = sealReply(cipher, SCOPE, reply('1'));
    const first = opened.replayed(SCOPE, sealed);
    const second = opened.replayed(SCOPE, sealed);
    expect(cipher.decrypted).to.equal(1);
    expect(second).to.equal(first);
    expect(first).to.deep.include({
      status: 201,
      headers: { Location: '/api/v1/users/1', 'Idempotent-Replayed': 'true' },
      body: reply('1').body,
    });
    expect(storedBodyJson(first)).to.equal(JSON.stringify(reply('1').body));
  });

  it('when the record holds another sealed text for the key (written again), then that text is opened, not the kept one', () => {
    const cipher = new CountingCipher('k1', randomBytes(32));
    const opened = new OpenedReplies(cipher);
    opened.replayed(SCOPE, sealReply(cipher, SCOPE, reply('1')));
    const again = opened.replayed(SCOPE, sealReply(cipher, SCOPE, reply('2')));
    expect(cipher.decrypted).to.equal(2);
    expect(again.body).to.deep.equal(reply('2').body);
    expect(opened.size).to.equal(1);
  });

  it('when a sealed text is not the scope key own (moved between records) or is damaged, then it throws and nothing is kept', () => {
    const cipher = new CountingCipher('k1', randomBytes(32));
    const opened = new OpenedReplies(cipher);
    const sealed = sealReply(cipher, OTHER, reply('1'));
    expect(() => opened.replayed(SCOPE, sealed)).to.throw();
    expect(() => opened.replayed(SCOPE, `${sealed.slice(0, -2)}AA`)).to.throw();
    expect(opened.size).to.equal(0);
    // The scope it was sealed for opens it.
    expect(opened.replayed(OTHER, sealed).body).to.deep.equal(reply('1').body);
  });

  it('when a kept reply is changed by its user, then that throws: the next replay of the key is not affected', () => {
    const cipher = new CountingCipher('k1', randomBytes(32));
    const opened = new OpenedReplies(cipher);
    const sealed = sealReply(cipher, SCOPE, reply('1'));
    const kept = opened.replayed(SCOPE, sealed);
    expect(() => {
      (kept.headers as Record<string, string>)['X-Other'] = 'x';
    }).to.throw(TypeError);
    expect(() => {
      ((kept.body as { data: { tags: string[] } }).data.tags as string[]).push('y');
    }).to.throw(TypeError);
    expect(opened.replayed(SCOPE, sealed).body).to.deep.equal(reply('1').body);
  });

  it('when more keys are opened than the bound (by count or by size), then the oldest go first', () => {
    const cipher = new CountingCipher('k1', randomBytes(32));
    const byCount = new OpenedReplies(cipher, 2);
    const sealed = ['a', 'b', 'c'].map((k) => sealReply(cipher, `${SCOPE}${k}`, reply(k)));
    for (const [i, k] of ['a', 'b', 'c'].entries()) byCount.replayed(`${SCOPE}${k}`, sealed[i]);
    expect(byCount.size).to.equal(2);
    const before = cipher.decrypted;
    byCount.replayed(`${SCOPE}c`, sealed[2]);
    expect(cipher.decrypted).to.equal(before);
    byCount.replayed(`${SCOPE}a`, sealed[0]);
    expect(cipher.decrypted).to.equal(before + 1);

    const bySize = new OpenedReplies(cipher, 100, 2000);
    for (let i = 0; i < 20; i++)
      bySize.replayed(`${SCOPE}${i}`, sealReply(cipher, `${SCOPE}${i}`, reply(String(i))));
    expect(bySize.size).to.be.within(1, 3);
  });

  it("when 5,000 user answers are kept, then the heap they take is within the bound's estimate (half to twice it)", () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const cipher = new ResponseCipher('k1', randomBytes(32));
    const n = 5000;
    const sealed = Array.from({ length: n }, (_, i) => {
      const scope = `tenant-${i % 50}:${100000 + i}:users.create:${randomBytes(16).toString('hex')}`;
      const data = {
        id: String(1000000 + i),
        name: `Test User ${i}`,
        age: 30,
        username: `user${i}`,
        email: `user${i}@example.com`,
        role: 'user',
        status: 'ACTIVE',
        createdAt: new Date().toISOString(),
        updatedAt: new Date().toISOString(),
      };
      const reply = {
        status: 201,
        headers: { Location: `/api/v1/users/${data.id}` },
        body: { code: 200, data },
      };
      return [scope, sealReply(cipher, scope, reply)] as const;
    });
    // The bound (8 MiB) holds about 5,000 of these: measured with a bound that holds them all.
    const opened = new OpenedReplies(cipher, n, 64 * 1024 * 1024);
    gc();
    const before = process.memoryUsage().heapUsed;
    // Each sealed text as the database driver gives it: a string of its own.
    for (const [scope, text] of sealed) opened.replayed(scope, Buffer.from(text).toString());
    gc();
    const used = process.memoryUsage().heapUsed - before;
    expect(opened.size).to.equal(n);
    expect(used).to.be.within(opened.bytesKept / 2, opened.bytesKept * 2);
  });
});
