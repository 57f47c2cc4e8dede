// Issue 27 item 6: a second effect on the mechanism (a message to a fake partner over loopback HTTP),
// driven through the fault checks payments pass: crash between perform and finalise, unknown, not done.
import { expect } from 'chai';
import { defineEffect, type EffectDeps, type EffectRow } from '../../idempotency/effect.js';
import { sweepExpired } from '../../idempotency/effect-recover.js';
import * as h from '../support/effect-harness.js';
import { sharedServer } from '../support/server.js';
import { idempotencyKey } from '../support/tokens.js';

const TABLE = 'partner_messages';
let partner: Awaited<ReturnType<typeof h.startPartner>>;
let deps: EffectDeps;
let crashes = 0;
/** What the recoverer's callbacks and finalise did, in order (the first test). */
const steps: string[] = [];
const effect = defineEffect<EffectDeps, string, EffectRow, true>({
  name: 'test.partner-message',
  downstream: 'Partner',
  failpoints: {},
  ...h.oneRowResource(TABLE, () => deps),
  perform: (_d, r) => partner.perform(r.id),
  query: (_d, r) => partner.query(r.id),
  finalise: async (d, lease, r) => {
    steps.push('finalise');
    if (crashes-- > 0) throw new Error('the process died between perform and finalise');
    return h.finishFenced(d, lease, TABLE, "status = 'SENT'", r.id, h.createdReply(r));
  },
  answer: h.createdReply,
});
const send = (id: string) => h.runWith(effect, deps, id, idempotencyKey());
const state = async (id: string) => [(await h.readRow(deps, TABLE, id))?.status, partner.sent.get(id)];

describe('effects: a test-only effect (a message to a partner) passes the fault checks of payments', () => {
  before(async () => {
    const { services } = await sharedServer();
    deps = { sequelize: services.sequelize, engine: services.idempotency };
    await h.createEffectTable(deps, TABLE);
    partner = await h.startPartner();
  });
  after(() => partner.close());

  it('when the process dies between perform and finalise, then the recoverer queries and finalises: sent once, its takeover counted before the finalise', async () => {
    const id = `m${idempotencyKey()}`;
    crashes = 1;
    await send(id).then(
      () => expect.fail('finalise should have thrown'),
      () => {},
    );
    const expire = `UPDATE idempotency_records SET lease_until = now() - interval '1 second' WHERE resource_id = $1`;
    await deps.sequelize.query(expire, { bind: [id] });
    steps.length = 0;
    const taken = await sweepExpired(effect, deps, 1000, undefined, () => steps.push('taken over'));
    expect(taken).to.be.at.least(1);
    expect(await state(id)).to.deep.equal(['SENT', 1]);
    // Each takeover is reported when it happens, before the resource can be final (server.ts counts
    // its metric there: a reader who sees the resource final never reads a count behind it).
    expect(steps.filter((s) => s === 'taken over')).to.have.length(taken);
    expect(steps.indexOf('taken over'), steps.join(', ')).to.be.lessThan(steps.indexOf('finalise'));
  });

  it('when the answer is lost (unknown), then the partner is asked before sending again: executed, sent once', async () => {
    const id = `m${idempotencyKey()}`;
    partner.nextMode('lose');
    expect((await send(id)).kind).to.equal('executed');
    expect(partner.sent.get(id)).to.equal(1);
  });

  it('when the partner certainly did nothing (503), then the message is resumable and a new key sends it once', async () => {
    const id = `m${idempotencyKey()}`;
    partner.nextMode('fail');
    expect((await send(id)).kind).to.equal('failed_retryable');
    expect((await h.readRow(deps, TABLE, id))?.resumableSince).to.be.instanceOf(Date);
    expect((await send(id)).kind).to.equal('executed');
    expect(await state(id)).to.deep.equal(['SENT', 1]);
  });
});
