// Entry for `npm run gateway`: the simulator as its own process, so that the service can be pointed
// at it with PAYMENT_GATEWAY_URL and the gateway can be stopped to simulate an unreachable one.
import { z } from 'zod';
import { startGatewaySimulator } from '../gateway/simulator.js';

const portSchema = z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(1).max(65535));

function fail(line: string): never {
  console.error(line);
  process.exit(1);
}

const raw = process.env.GATEWAY_PORT ?? '4010';
const parsed = portSchema.safeParse(raw);
if (!parsed.success) fail(`GATEWAY_PORT must be an integer between 1 and 65535 (got "${raw.slice(0, 20)}")`);
const port = parsed.data;

try {
  const simulator = await startGatewaySimulator({ port, host: '127.0.0.1' });
  console.log(`payment gateway simulator listening on ${simulator.url}`);
  let stopping = false;
  const stop = () => {
    // A second signal while closing must not start a second close or exit early with another code.
    if (stopping) return;
    stopping = true;
    void simulator.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} catch (err) {
  const code = (err as NodeJS.ErrnoException).code;
  fail(`payment gateway simulator could not listen on 127.0.0.1:${port} (GATEWAY_PORT): ${code ?? 'error'}`);
}
