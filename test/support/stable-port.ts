import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * A free port for a listener that a test closes and opens again on the same port (the gateway slot's
 * relay going down and up). A port from the kernel's ephemeral range (what `listen(0)` gives) can be
 * taken in between as the local port of any outgoing connection on the machine: a chaos run saw
 * EADDRINUSE on re-listening. So this one is drawn below that range, where the kernel never assigns
 * ports on its own, and checked free by binding it.
 */
export async function stablePort(): Promise<number> {
  const low = ephemeralLow();
  const from = Math.min(20000, low - 1000);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = from + Math.floor(Math.random() * (low - from));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port between ${from} and ${low}`);
}

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 2048) return low;
  } catch {
    // Not Linux: the IANA dynamic range starts at 49152.
  }
  return 49152;
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
