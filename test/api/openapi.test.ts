import { expect } from 'chai';
import { appRouter } from '../../routers/index.js';
import { metaByProcedure } from '../../routers/meta.js';
import { ALIASES } from '../../server/rest-routes.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';
import { expectError } from '../support/users.js';

interface Operation {
  security?: unknown[];
  requestBody?: unknown;
  responses: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}
interface Schema {
  anyOf?: Schema[];
  type?: string;
  required?: string[];
  properties?: Record<string, Schema>;
}
type Doc = { openapi: string; paths: Record<string, Record<string, Operation>> };

/** Every procedure's REST route, read from the router itself (so later resources are checked too). */
function routesOfRouter(): Array<{
  name: string;
  method: string;
  path: string;
  success: number;
  protect: boolean;
}> {
  return [...metaByProcedure(appRouter)].flatMap(([name, meta]) => {
    if (!meta.openapi) return [];
    const { method, path, protect } = meta.openapi;
    return [
      {
        name,
        method: method.toLowerCase(),
        path,
        success: meta.successStatus ?? 200,
        protect: protect !== false,
      },
    ];
  });
}

// CONTRACT section 3, the rows that exist in this part: method, canonical path, success status.
const USERS_AND_TOKENS: Array<[string, string, number]> = [
  ['post', '/api/v1/tokens', 201],
  ['get', '/api/v1/users', 200],
  ['get', '/api/v2/users', 200],
  ['get', '/api/v1/users/{id}', 200],
  ['post', '/api/v1/users', 201],
  ['put', '/api/v1/users/{id}', 200],
  ['patch', '/api/v1/users/{id}', 200],
  ['put', '/api/v1/users/{id}/status', 200],
  ['delete', '/api/v1/users/{id}', 204],
];

async function openapiDoc(): Promise<Doc> {
  const res = await http('GET', '/openapi.json');
  expect(res.status).to.equal(200);
  expect(res.headers.get('content-type')).to.match(/^application\/json/);
  return res.body as Doc;
}

describe('OpenAPI document (GET /openapi.json)', () => {
  it('when fetched without a token, then it is an OpenAPI 3 document with exactly the procedures, their aliases and the probes as operations', async () => {
    const doc = await openapiDoc();
    expect(doc.openapi).to.match(/^3\./);
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m} ${path}`),
    );
    const routes = routesOfRouter().map((r) => `${r.method} ${r.path}`);
    const aliases = ALIASES.flatMap((a) => a.methods.map((m) => `${m.toLowerCase()} ${a.alias}`));
    expect(routes.length).to.be.greaterThanOrEqual(USERS_AND_TOKENS.length);
    // Plain routes described by hand: the probes and the export's file (a raw body).
    const plain = ['get /healthz', 'get /readyz', 'get /api/v1/exports/{id}/file'];
    expect(documented.sort()).to.deep.equal([...routes, ...aliases, ...plain].sort());
  });

  it('when read per procedure, then each operation documents its success status and only that one', async () => {
    const doc = await openapiDoc();
    for (const route of routesOfRouter()) {
      const statuses = Object.keys(doc.paths[route.path][route.method].responses);
      const successes = statuses.filter((s) => s.startsWith('2'));
      expect(successes, route.name).to.include(String(route.success));
      if (route.success !== 200) expect(successes, route.name).to.not.include('200');
    }
  });

  for (const [method, path, status] of USERS_AND_TOKENS) {
    it(`when ${method.toUpperCase()} ${path} is looked up, then it is documented with success ${status}`, async () => {
      const op = (await openapiDoc()).paths[path]?.[method];
      expect(op, `${method} ${path}`).to.not.equal(undefined);
      expect(Object.keys(op.responses)).to.include(String(status));
      const success = op.responses[String(status)];
      if (status === 204) expect(success.content).to.equal(undefined);
      else {
        // An idempotent operation may also answer the 202 PROCESSING envelope: every branch is an envelope.
        const schema = success.content?.['application/json']?.schema;
        for (const branch of schema?.anyOf ?? [schema]) {
          expect(branch?.properties).to.have.keys('code', 'message', 'data');
        }
      }
      if (path === '/api/v1/tokens') expect(op.security ?? []).to.deep.equal([]);
      else expect(op.security).to.deep.equal([{ Authorization: [] }]);
    });
  }

  it("when any operation lists an error status, then its body is the envelope {code, message, data} (data null, or a 40901's {mismatch})", async () => {
    const doc = await openapiDoc();
    let errors = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (path === '/healthz' || path === '/readyz') continue; // probes: 200, 503, 405 only
      for (const [method, op] of Object.entries(ops)) {
        expect(Object.keys(op.responses), `${method} ${path}`).to.include.members(['400', '404', '500']);
        for (const [status, response] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue;
          errors += 1;
          const schema = response.content?.['application/json']?.schema;
          expect(schema?.required, `${method} ${path} ${status}`).to.have.members([
            'code',
            'message',
            'data',
          ]);
          expect(schema?.properties?.code.type).to.equal('integer');
          expect(schema?.properties?.message.type).to.equal('string');
          const data = schema?.properties?.data as { oneOf?: Array<{ type: string }> };
          expect(data.oneOf?.map((s) => s.type)).to.deep.equal(['null', 'object']);
        }
      }
    }
    expect(errors).to.be.greaterThan(0);
  });

  it('when the response schemas are read, then none has a password, hash or salt field', async () => {
    const doc = await openapiDoc();
    for (const ops of Object.values(doc.paths)) {
      for (const op of Object.values(ops))
        expect(JSON.stringify(op.responses)).to.not.match(/password|hash|salt/i);
    }
    const create = doc.paths['/api/v1/users'].post.requestBody;
    expect(JSON.stringify(create)).to.include('password');
  });
});

describe('API docs page (GET /docs)', () => {
  it('when /docs is fetched, then 200 HTML at /docs itself without a redirect', async () => {
    const { url } = await sharedServer();
    const res = await fetch(`${url}/docs`, { redirect: 'manual' });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/html/);
    expect(await res.text()).to.include('swagger-ui');
  });

  it('when the page names its assets, then each answers 200 and the page loads /openapi.json', async () => {
    const page = (await http('GET', '/docs')).text;
    const assets = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets).to.include.members(['/docs/assets/swagger-ui-bundle.js', '/docs/assets/swagger-ui.css']);
    for (const asset of assets) {
      const res = await http('GET', asset);
      expect(res.status, asset).to.equal(200);
      expect(res.text.length, asset).to.be.greaterThan(0);
      const type = asset.endsWith('.css') ? /^text\/css/ : /javascript/;
      expect(res.headers.get('content-type'), asset).to.match(type);
    }
    expect((await http('GET', '/docs/init.js')).text).to.include('/openapi.json');
  });

  it('when an asset does not exist, then 404 envelope', async () => {
    expectError(await http('GET', '/docs/assets/no-such-file.js'), 404);
  });

  it("when the document is read, then it holds the input constraints the service enforces: page/size bounds, the amount rule, a keyed DELETE's 202", async () => {
    const doc = (await openapiDoc()) as unknown as {
      paths: Record<
        string,
        Record<
          string,
          {
            parameters?: Array<{ name: string; schema: Record<string, unknown> }>;
            requestBody?: {
              content: Record<string, { schema: { properties: Record<string, { oneOf?: unknown[] }> } }>;
            };
            responses: Record<string, unknown>;
          }
        >
      >;
    };
    const params = Object.fromEntries(
      (doc.paths['/api/v1/users'].get.parameters ?? []).map((p) => [p.name, p.schema]),
    );
    expect(params.page).to.include({ type: 'integer', minimum: 1, default: 1 });
    expect(params.size).to.include({ type: 'integer', minimum: 1, maximum: 100, default: 10 });
    const amount =
      doc.paths['/api/v1/orders'].post.requestBody?.content['application/json'].schema.properties.amount;
    expect(amount?.oneOf).to.have.length(2);
    // The string form says what the service takes: positive, at most 12 + 2 digits.
    const text = ((amount?.oneOf ?? []) as Array<{ type: string; pattern?: string }>).find(
      (o) => o.type === 'string',
    );
    const pattern = new RegExp(text?.pattern ?? '$^');
    for (const ok of ['10', '10.5', '10.50', '0.01', '999999999999.99'])
      expect(pattern.test(ok), ok).to.equal(true);
    for (const bad of ['0', '0.00', '01', '1.234', '1000000000000', '-1', 'ten', ' 10.00', '10.00\n'])
      expect(pattern.test(bad), bad).to.equal(false);
    expect(doc.paths['/api/v1/users/{id}'].delete.responses).to.have.property('202');
  });

  it('when the document is read, then the seed aliases are deprecated copies naming their canonical path, the probes are described, a PATCH body is a non-empty strict object, and public operations declare no security', async () => {
    const doc = (await openapiDoc()) as unknown as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
    };
    const alias = doc.paths['/api/users/{id}']?.delete;
    expect(alias?.deprecated).to.equal(true);
    expect(String(alias?.description)).to.include('/api/v1/users/{id}');
    expect(doc.paths['/orders']?.post?.deprecated).to.equal(true);
    expect(Object.keys(doc.paths['/readyz']?.get?.responses as object)).to.include.members(['200', '503']);
    expect(doc.paths['/healthz']?.get?.security).to.deep.equal([]);
    const patch = doc.paths['/api/v1/users/{id}'].patch.requestBody as {
      content: Record<string, { schema: Record<string, unknown> }>;
    };
    expect(patch.content['application/json'].schema).to.include({
      additionalProperties: false,
      minProperties: 1,
    });
    expect(doc.paths['/api/v1/tokens'].post.security).to.deep.equal([]);
  });
});
