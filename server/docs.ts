import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type Router } from 'express';
import { MethodNotAllowed } from '../core/errors.js';
import { sendError } from './http-errors.js';

const require = createRequire(import.meta.url);
// Served from node_modules: the page works offline (no CDN).
const SWAGGER_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Idempotent service API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>`;

const INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });`;

export function docsRouter(): Router {
  const r = express.Router({ strict: true });
  r.get('/docs', (_req, res) => {
    res.type('html').send(PAGE);
  });
  r.get('/docs/init.js', (_req, res) => {
    res.type('application/javascript').send(INIT);
  });
  r.use('/docs/assets', express.static(SWAGGER_DIR, { index: false, redirect: false }));
  // Known paths: another method is a 405 with Allow (CONTRACT section 3), not the 404 fallback.
  r.all(['/docs', '/docs/init.js'], (_req, res) => sendError(res, new MethodNotAllowed(['GET'])));
  return r;
}
