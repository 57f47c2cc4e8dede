import { readFileSync } from 'node:fs';
import net from 'node:net';

/** The ports this process has handed out: never twice (two callers at once could both find one free). */
const handedOut = new Set<number>();

/**
 * A free port for a listener that is opened later, by another process or after a restart: a service
 * instance a test or the bench spawns, a PostgreSQL, a NATS server, or a relay that goes down and up on
 * the same port. (The bench imports it from here: it is the one port helper of the tests and tools.) A port from the kernel's ephemeral range (what `listen(0)` gives) is free only until someone
 * else's `listen(0)` or outgoing connection takes it: a chaos run saw EADDRINUSE on re-listening, and
 * a CI rehearsal saw one of three instances started together fail to listen, its port taken meanwhile
 * by a sibling's in-process gateway simulator (`listen(0)` during its start-up). So this one is drawn
 * below that range, where the kernel never assigns ports on its own, and checked free by binding it.
 */
export async function stablePort(): Promise<number> {
  const low = ephemeralLow();
  const from = Math.min(20000, low - 1000);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = from + Math.floor(Math.random() * (low - from));
    if (handedOut.has(port)) continue;
    handedOut.add(port);
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
