import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import type { DestinationPolicy } from '../../events/destination-guard.js';
import { deliverOnce, newWebhookSecret, type OutgoingEvent } from '../../events/webhook-sender.js';
import { stablePort } from '../support/stable-port.js';

type Received = { body: string; headers: Record<string, string> };
type Behaviour = 'ok' | 'fail' | 'hang' | 'redirect' | 'huge';

const outsideProduction: DestinationPolicy = { production: false, allowPrivateNetworks: false };
const production: DestinationPolicy = { production: true, allowPrivateNetworks: false };

/** A real receiver on loopback that records each request and answers as the test says. */
async function startReceiver() {
  const received: Received[] = [];
  let behaviour: Behaviour = 'ok';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        body: Buffer.concat(chunks).toString('utf8'),
        headers: req.headers as Record<string, string>,
      });
      if (behaviour === 'hang') return;
      if (behaviour === 'ok') res.writeHead(204).end();
      else if (behaviour === 'fail') res.writeHead(500).end('receiver broke');
      else if (behaviour === 'redirect')
        res.writeHead(302, { location: `http://127.0.0.1:${port()}/elsewhere` }).end();
      else if (behaviour === 'huge') {
        // Never ends on its own: the sender must stop reading at its cap, not wait for the end.
        res.writeHead(200);
        const block = Buffer.alloc(16 * 1024, 'x');
        const pump = () => {
          while (res.write(block)) if (res.destroyed) return;
          res.once('drain', pump);
        };
        pump();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = () => (server.address() as AddressInfo).port;
  return {
    received,
    url: (path = '/hook') => `http://127.0.0.1:${port()}${path}`,
    port,
    answer: (b: Behaviour) => {
      behaviour = b;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const event = (): OutgoingEvent => ({
  id: `evt_${Math.random().toString(36).slice(2)}`,
  type: 'payment.succeeded',
  createdAt: new Date().toISOString(),
  data: { id: 'pay_1', status: 'SUCCEEDED', amount: '10.00' },
});

describe('webhook sender (CONTRACT section 12)', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const secret = newWebhookSecret();
  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(() => receiver.close());

  it('when the receiver answers 2xx, then it succeeds and the standardwebhooks library verifies the signature', async () => {
    const sent = event();
    const result = await deliverOnce({ url: receiver.url(), secret }, sent, {
      timeoutMs: 5000,
      policy: outsideProduction,
    });
    expect(result).to.deep.equal({ ok: true, statusCode: 204, error: null });
    expect(receiver.received).to.have.length(1);
    const [{ body, headers }] = receiver.received;
    expect(new Webhook(secret).verify(body, headers)).to.deep.equal(sent);
    expect(headers['webhook-id']).to.equal(sent.id);
    expect(headers['webhook-timestamp']).to.match(/^\d{10}$/);
    expect(headers['webhook-signature']).to.match(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(headers['content-type']).to.equal('application/json');
  });

  it('when the receiver verifies with another secret, then verification fails', async () => {
    await deliverOnce({ url: receiver.url(), secret }, event(), {
      timeoutMs: 5000,
      policy: outsideProduction,
    });
    const [{ body, headers }] = receiver.received;
    expect(() => new Webhook(newWebhookSecret()).verify(body, headers)).to.throw(/signature/i);
  });

  it('when the body is changed on the way, then verification fails', async () => {
    await deliverOnce({ url: receiver.url(), secret }, event(), {
      timeoutMs: 5000,
      policy: outsideProduction,
    });
    const [{ body, headers }] = receiver.received;
    expect(() => new Webhook(secret).verify(body.replace('10.00', '99.00'), headers)).to.throw(/signature/i);
  });

  it('when the receiver answers 500, then it fails with the status and no secret in the error', async () => {
    receiver.answer('fail');
    const result = await deliverOnce({ url: receiver.url(), secret }, event(), {
      timeoutMs: 5000,
      policy: outsideProduction,
    });
    expect(result.ok).to.equal(false);
    expect(result.statusCode).to.equal(500);
    expect(result.error).to.match(/500/);
    expect(result.error).not.to.include(secret.slice(6, 20));
  });

  it('when the receiver redirects, then the redirect is not followed and the attempt fails', async () => {
    receiver.answer('redirect');
    const result = await deliverOnce({ url: receiver.url(), secret }, event(), {
      timeoutMs: 5000,
      policy: outsideProduction,
    });
    expect(result).to.deep.include({ ok: false, statusCode: 302 });
    expect(result.error).to.match(/redirect/);
    expect(receiver.received.map((r) => r.headers.host)).to.have.length(1);
  });

  it('when the receiver never answers, then the attempt fails as timed out', async () => {
    receiver.answer('hang');
    const result = await deliverOnce({ url: receiver.url(), secret }, event(), {
      timeoutMs: 300,
      policy: outsideProduction,
    });
    expect(result).to.deep.equal({ ok: false, statusCode: null, error: 'timed out after 300 ms' });
  });

  it('when the receiver streams an endless 2xx body, then the sender stops at its cap and succeeds', async () => {
    receiver.answer('huge');
    const result = await deliverOnce({ url: receiver.url(), secret }, event(), {
      timeoutMs: 20000,
      policy: outsideProduction,
    });
    expect(result).to.deep.equal({ ok: true, statusCode: 200, error: null });
  });

  it('when nothing listens on the port, then it fails as connection refused', async () => {
    const url = `http://127.0.0.1:${await stablePort()}/hook`;
    const result = await deliverOnce({ url, secret }, event(), {
      timeoutMs: 5000,
      policy: outsideProduction,
    });
    expect(result).to.deep.equal({ ok: false, statusCode: null, error: 'connection refused (ECONNREFUSED)' });
  });

  it('when NODE_ENV=production and the host resolves to loopback, then it is refused at delivery and nothing is sent', async () => {
    const url = `http://localhost:${receiver.port()}/hook`;
    const result = await deliverOnce({ url, secret }, event(), { timeoutMs: 5000, policy: production });
    expect(result.ok).to.equal(false);
    expect(result.error).to.match(/loopback/);
    expect(receiver.received).to.have.length(0);
  });

  it('when DNS answers differently at connect than at the check (rebinding), then the checked address is used', async () => {
    // The host does not exist in real DNS: reaching the receiver proves the connect used the pinned
    // address from the check instead of resolving again.
    let lookups = 0;
    const resolveAll = async () => {
      lookups++;
      return [{ address: '127.0.0.1', family: 4 as const }];
    };
    const url = `http://rebinding.invalid:${receiver.port()}/hook`;
    const result = await deliverOnce({ url, secret }, event(), {
      timeoutMs: 5000,
      policy: outsideProduction,
      resolveAll,
    });
    expect(result).to.deep.equal({ ok: true, statusCode: 204, error: null });
    expect(lookups).to.equal(1);
    expect(receiver.received[0].headers.host).to.equal(`rebinding.invalid:${receiver.port()}`);
  });

  it('when the URL has credentials or another scheme, then it fails without a request', async () => {
    for (const url of [`http://user:pw@127.0.0.1:${receiver.port()}/`, 'ftp://127.0.0.1/x']) {
      const result = await deliverOnce({ url, secret }, event(), {
        timeoutMs: 5000,
        policy: outsideProduction,
      });
      expect(result.ok, url).to.equal(false);
    }
    expect(receiver.received).to.have.length(0);
  });

  it('when the stored secret is malformed, then it fails without a request and without the secret in the error', async () => {
    const broken = 'whsec_%%%not-base64%%%';
    const result = await deliverOnce({ url: receiver.url(), secret: broken }, event(), {
      timeoutMs: 5000,
      policy: outsideProduction,
    });
    expect(result).to.deep.equal({
      ok: false,
      statusCode: null,
      error: 'the endpoint secret is not a whsec_ base64 secret',
    });
    expect(receiver.received).to.have.length(0);
  });

  it('newWebhookSecret gives whsec_ and 32 random bytes in base64, different each time', () => {
    const a = newWebhookSecret();
    expect(a).to.match(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(a.slice(6), 'base64')).to.have.length(32);
    expect(a).not.to.equal(newWebhookSecret());
  });
});
