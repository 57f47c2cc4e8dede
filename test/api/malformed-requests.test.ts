// An outside fuzz audit (about 13,000 malformed requests) found four inputs that were a 500 and a
// group of requests Node's own HTTP parser answered with a bare status line. Bad input gets a 4xx
// in the envelope (CONTRACT sections 2 and 6), never a 500.
import net from 'node:net';
import { expect } from 'chai';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { idempotencyKey, uniqueTenant } from '../support/tokens.js';
import { trpcMutation } from '../support/trpc-http.js';
import { adminOf } from '../support/users.js';

/** One raw request on its own connection; the whole answer as text (the server closes it). */
async function raw(request: string): Promise<string> {
  const { port } = await sharedServer();
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      text += d;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
    socket.write(request);
  });
}

/** Status line and envelope of a raw answer. */
function parsed(answer: string) {
  const [head, body] = answer.split('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  return { status, head, envelope: JSON.parse(body) as { code: number; message: string; data: null } };
}

describe('malformed requests: a 4xx in the envelope, never a 500', () => {
  it('when the export file id is not valid percent-encoding (%ZZ), then 401 without a token and 400 naming id with one (Express decoded it itself: a 500)', async () => {
    const admin = adminOf(uniqueTenant('mf'));
    for (const id of ['%ZZ', '%', '%E2%82', '%C0%AF']) {
      const anonymous = await http('GET', `/api/v1/exports/${id}/file`);
      expect(anonymous.status, `${id}: ${anonymous.text}`).to.equal(401);
      const res = await http('GET', `/api/v1/exports/${id}/file`, { headers: admin });
      expect(res.status, `${id}: ${res.text}`).to.equal(400);
      expect(res.body).to.deep.include({ code: 400, data: null });
      expect(res.body.message).to.match(/^id: /);
      const other = await http('DELETE', `/api/v1/exports/${id}/file`, { headers: admin });
      expect(other.status, id).to.equal(405);
      expect(other.headers.get('allow')).to.equal('GET');
    }
  });

  it('when TRACE is sent to a tRPC path, then 405 in tRPC error form, as other methods tRPC does not serve (the adapter threw: a 500)', async () => {
    // fetch refuses to send TRACE: a raw request.
    for (const path of ['/trpc/users.list', '/trpc/orders.create', '/trpc/no.such']) {
      const answer = await raw(`TRACE ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const [head, body] = answer.split('\r\n\r\n');
      expect(head, path).to.match(/^HTTP\/1\.1 405 /);
      expect(JSON.parse(body).error.data.code, path).to.equal('METHOD_NOT_SUPPORTED');
    }
  });

  it('when a webhook endpoint id over tRPC holds NUL or a lone surrogate, then 400 naming id, with or without a key (PostgreSQL refused NUL, the fingerprint refused the surrogate: 500s)', async () => {
    const admin = adminOf(uniqueTenant('mf'));
    for (const id of ['we_\u0000', '\u0000', '\ud800', 'we_\udc00x']) {
      for (const key of [undefined, idempotencyKey()]) {
        const headers = key ? { ...admin, 'Idempotency-Key': key } : admin;
        for (const procedure of ['webhookEndpoints.delete']) {
          const res = await trpcMutation(procedure, { id }, headers);
          expect(res.status, `${JSON.stringify(id)} ${key ?? 'no key'}: ${res.text}`).to.equal(400);
          expect(res.body.error.message).to.match(/^id: /);
        }
      }
    }
  });

  it("when Node's parser refuses a request (bad request line, control character in a header, bad chunk framing), then 400 with the envelope and the connection closed", async () => {
    const requests = [
      'GET /api/v1/users/1 2 HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET /api/v1/users HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\u0001b\r\n\r\n',
      'POST /api/v1/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    ];
    for (const request of requests) {
      const answer = parsed(await raw(request));
      expect(answer.status, JSON.stringify(request)).to.equal(400);
      expect(answer.head).to.match(/\r\nContent-Type: application\/json\r\n/i);
      expect(answer.envelope).to.deep.equal({ code: 400, message: 'Malformed HTTP request', data: null });
    }
  });

  it('when the headers are larger than Node takes, then 431 with the envelope', async () => {
    const answer = parsed(
      await raw(`GET /api/v1/users HTTP/1.1\r\nHost: x\r\nX-Big: ${'x'.repeat(20000)}\r\n\r\n`),
    );
    expect(answer.status).to.equal(431);
    expect(answer.envelope.code).to.equal(431);
    expect(answer.envelope.data).to.equal(null);
  });

  it('when Expect is not 100-continue, then 417 with the envelope', async () => {
    // fetch refuses to send Expect: a raw request.
    const answer = parsed(await raw('GET /api/v1/users HTTP/1.1\r\nHost: x\r\nExpect: weird\r\n\r\n'));
    expect(answer.status).to.equal(417);
    expect(answer.envelope).to.deep.include({ code: 417, data: null });
  });
});
