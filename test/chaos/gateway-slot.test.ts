import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { createGatewayClient } from '../../gateway/client.js';
import type { GatewayClient } from '../../gateway/types.js';
import { type GatewaySlot, startGatewaySlot } from '../support/gateway-slot.js';

/**
 * The gateway slot as the service sees it through its relay (test/support/gateway-slot.ts): every
 * failure the gateway contract distinguishes arrives as itself, and an unreachable gateway keeps its
 * records when it listens again.
 */
describe('gateway slot: the relay and the unreachable gateway (CONTRACT section 9)', () => {
  let slot: GatewaySlot;
  let service: GatewayClient;
  const charge = (paymentNo: string) => service.charge({ paymentNo, amount: '5.00', currency: 'USD' });

  beforeEach(async () => {
    slot = await startGatewaySlot();
    service = createGatewayClient({ baseUrl: slot.url, timeoutMs: 400 });
  });
  afterEach(async () => {
    await service.close();
    await slot.close();
  });

  it('when the gateway is unreachable, then a charge is refused (nothing sent) and a query unavailable; once reachable again on the same port, the charges made before are still there', async () => {
    expect((await charge('pn-before')).kind).to.equal('charged');
    await slot.unreachable();
    expect(slot.mode).to.equal('unreachable');
    // The client's kept-alive socket was cut: once it has seen that, a new connection is refused
    // (a request sent on the cut socket before would see a reset: an unknown outcome, rightly).
    await sleep(50);
    expect(await charge('pn-during')).to.deep.equal({ kind: 'not-charged', reason: 'refused' });
    expect((await service.query('pn-before')).kind).to.equal('unavailable');
    // The test's own view (private port) still reads the ledger meanwhile.
    expect((await slot.ledger()).charges.map((c) => c.paymentNo)).to.deep.equal(['pn-before']);
    await slot.reachable();
    expect(slot.mode).to.equal('simulator');
    const found = await service.query('pn-before');
    expect(found.kind).to.equal('found');
    const again = await charge('pn-before');
    expect(again.kind === 'charged' && again.charge.chargeId).to.equal(
      found.kind === 'found' && found.charge.chargeId,
    );
    expect((await slot.ledger()).charges).to.have.length(1);
  });

  it('when the simulator resets after charging or never answers, then the client behind the relay sees a reset and a time-out (outcome unknown), and 5xx stays 5xx', async () => {
    await slot.client.setFaults({ resetAfterChargeRate: 1 });
    expect(await charge('pn-reset')).to.deep.equal({ kind: 'unknown', reason: 'reset' });
    await slot.client.setFaults({ timeoutAfterChargeRate: 1 });
    expect(await charge('pn-timeout')).to.deep.equal({ kind: 'unknown', reason: 'timeout' });
    await slot.client.setFaults({ errorRate: 1 });
    expect(await charge('pn-5xx')).to.deep.equal({ kind: 'not-charged', reason: 'server-error' });
    await slot.client.setFaults({});
    expect((await slot.ledger()).charges.map((c) => c.paymentNo)).to.deep.equal(['pn-reset', 'pn-timeout']);
  });

  it('when the slot is down, then a charge is refused; started again as a simulator, its ledger is fresh', async () => {
    expect((await charge('pn-old')).kind).to.equal('charged');
    await slot.down();
    expect(slot.mode).to.equal('down');
    await sleep(50);
    expect(await charge('pn-down')).to.deep.equal({ kind: 'not-charged', reason: 'refused' });
    await slot.simulator();
    expect((await slot.ledger()).charges).to.have.length(0);
  });
});
