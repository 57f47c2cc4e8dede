// Writes client/openapi-types.ts (the REST client's types) from the document the service serves at GET /openapi.json
// (built here without a server or a database). Run: npx tsx scripts/generate-openapi-types.ts
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { appRouter } from '../routers/index.js';
import { buildOpenApiDocument } from '../server/openapi.js';
import { renderOpenApiTypes } from './openapi-typegen.js';

const target = fileURLToPath(new URL('../client/openapi-types.ts', import.meta.url));
// Round-trip through JSON: exactly what a client receives from GET /openapi.json.
const doc = JSON.parse(JSON.stringify(buildOpenApiDocument(appRouter, '/')));
await writeFile(target, await renderOpenApiTypes(doc));
console.log(`wrote ${target}`);
