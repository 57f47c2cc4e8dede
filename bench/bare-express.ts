/**
 * HTTP ceiling: a bare Express 5 process answering POST /api/v1/users with the same envelope and
 * a user-shaped payload of the same size, with no auth, validation, database or idempotency. The
 * benchmark sends it the very requests of the plain-create scenario.
 * Usage: node --import tsx bench/bare-express.ts <port>
 */
import express from 'express';

const port = Number(process.argv[2] ?? 0);
const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.use(express.json({ limit: 65536 }));

let id = 0;
app.post('/api/v1/users', (req, res) => {
  id += 1;
  const now = new Date().toISOString();
  const body = req.body as { name?: string; age?: number };
  res
    .status(201)
    .location(`/api/v1/users/${id}`)
    .json({
      code: 200,
      message: 'Success',
      data: {
        id: String(id),
        name: body.name ?? '',
        age: body.age ?? 0,
        username: null,
        email: null,
        role: 'user',
        status: 'ACTIVE',
        createdAt: now,
        updatedAt: now,
      },
    });
});
app.get('/healthz', (_req, res) => {
  res.json({ code: 200, message: 'Success', data: { status: 'ok' } });
});

const server = app.listen(port, '127.0.0.1', () => {
  process.stdout.write(`listening ${port}\n`);
});
server.keepAliveTimeout = 5000;
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
