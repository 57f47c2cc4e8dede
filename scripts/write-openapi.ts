// Writes the document the service serves at GET /openapi.json to a file (default .tmp/openapi.json),
// built without a server or a database, for the OpenAPI linters (npm run lint:openapi).
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { appRouter } from '../routers/index.js';
import { buildOpenApiDocument } from '../server/openapi.js';

const target = path.resolve(process.argv[2] ?? '.tmp/openapi.json');
await mkdir(path.dirname(target), { recursive: true });
await writeFile(target, `${JSON.stringify(buildOpenApiDocument(appRouter, '/'), null, 2)}\n`);
console.log(`wrote ${target}`);
