// CONTRACT section 2: every REST answer except a 204 has `Content-Type: application/json`, exactly
// that, as the procedures' answers do; the answers written outside the procedures (the export's file
// route, the body reader, routing, the probes, the document) once went out through Express's
// res.json(), which adds `; charset=utf-8`.
import { expect } from 'chai';
import { sqlRows } from '../../core/sql.js';
import { type HttpResult, http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { bearer, uniqueTenant } from '../support/tokens.js';
import { adminOf } from '../support/users.js';

const MAX_BODY_BYTES = 65536;
const USER = '930000001';

/**
 * An export row written directly, its lease held far ahead so that no worker touches it: PROCESSING,
 * or SUCCEEDED with a file that expired a second ago.
 */
async function exportRow(tenant: string, state: 'processing' | 'expired'): Promise<string> {
  const { sequelize } = (await sharedServer()).services;
  const final = state === 'expired';
  const [row] = await sqlRows<{ id: string }>(
    sequelize,
    `INSERT INTO exports (tenant_id, user_id, all_users, resource, format, snapshot_at, lease_owner, lease_until${final ? ', status, completed_at, expires_at, row_count, bytes' : ''})
     VALUES ($1, $2, false, 'orders', 'csv', now(), 'held-by-test', now() + interval '1 hour'${final ? ", 'SUCCEEDED', now(), now() - interval '1 second', 0, 0" : ''})
     RETURNING id::text AS id`,
    [tenant, USER],
  );
  return row.id;
}

const postUsers = (raw: string, headers: Record<string, string>, contentType = 'application/json') =>
  http('POST', '/api/v1/users', { raw, headers: { ...headers, 'Content-Type': contentType } });

describe('the media type of JSON answers (CONTRACT section 2)', () => {
  it('when any REST answer carries JSON (an error of the file route, of the body, of routing; a probe; the document; a procedure), then its Content-Type is exactly application/json', async () => {
    const tenant = uniqueTenant('media');
    const user = bearer(tenant, USER);
    const admin = adminOf(tenant);
    const processing = await exportRow(tenant, 'processing');
    const expired = await exportRow(tenant, 'expired');
    const cases: Array<[string, number, HttpResult]> = [
      ['file: no token', 401, await http('GET', `/api/v1/exports/${processing}/file`)],
      ['file: a bad id', 400, await http('GET', '/api/v1/exports/abc/file', { headers: user })],
      [
        'file: no such export',
        404,
        await http('GET', '/api/v1/exports/9000000000000000000/file', { headers: user }),
      ],
      ['file: expired', 404, await http('GET', `/api/v1/exports/${expired}/file`, { headers: user })],
      [
        'file: still PROCESSING',
        409,
        await http('GET', `/api/v1/exports/${processing}/file`, { headers: user }),
      ],
      [
        'file: another method',
        405,
        await http('PUT', `/api/v1/exports/${processing}/file`, { headers: user }),
      ],
      ['malformed JSON', 400, await postUsers('{"name":', admin)],
      ['a body that is not an object', 400, await postUsers('[1]', admin)],
      ['a body over MAX_BODY_BYTES', 413, await postUsers(`"${'x'.repeat(MAX_BODY_BYTES)}"`, admin)],
      ['a body that is not JSON', 415, await postUsers('{}', admin, 'text/plain')],
      ['an unknown path', 404, await http('GET', '/no/such/path')],
      ['a trailing slash', 404, await http('GET', '/api/v1/users/', { headers: admin })],
      [
        'a procedure path, another method',
        405,
        await http('DELETE', '/api/v1/exports/1', { headers: admin }),
      ],
      ['a probe, another method', 405, await http('POST', '/healthz')],
      ['the document, another method', 405, await http('DELETE', '/openapi.json')],
      ['liveness', 200, await http('GET', '/healthz')],
      ['readiness', 200, await http('GET', '/readyz')],
      ['the OpenAPI document', 200, await http('GET', '/openapi.json')],
      ['a procedure', 200, await http('GET', '/api/v1/users', { headers: admin })],
      [
        'a procedure, an error',
        404,
        await http('GET', '/api/v1/users/9000000000000000000', { headers: admin }),
      ],
    ];
    for (const [label, status, res] of cases) {
      expect(res.status, `${label}: ${res.text.slice(0, 200)}`).to.equal(status);
      expect(res.headers.get('content-type'), label).to.equal('application/json');
      expect(() => JSON.parse(res.text), label).to.not.throw();
    }
  });

  it('when the exempt non-JSON routes answer, then they keep their own types: Prometheus text for /metrics, HTML for /docs', async () => {
    const metrics = await http('GET', '/metrics');
    expect(metrics.headers.get('content-type')).to.match(/^text\/plain/);
    const docs = await http('GET', '/docs');
    expect(docs.headers.get('content-type')).to.match(/^text\/html/);
  });
});
