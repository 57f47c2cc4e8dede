import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from 'nats';

/** The nats-server program: NATS_SERVER_BIN, or the first one found on PATH or in /usr/sbin. */
export function natsServerProgram(): string | undefined {
  if (process.env.NATS_SERVER_BIN) return process.env.NATS_SERVER_BIN;
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/bin'];
  return dirs
    .filter((dir) => dir.startsWith('/'))
    .map((dir) => path.join(dir, 'nats-server'))
    .find((file) => existsSync(file));
}

/**
 * A NATS server with JetStream of a test's own (a loopback port, a store folder), so a test can take
 * it down and bring it back (same port, same store: the streams survive) without touching the
 * machine's server. Stopped by its pid only.
 */
export class PrivateNatsServer {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  output = '';

  constructor(
    private readonly program: string,
    readonly port: number,
    private readonly storeDir: string,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts it and waits (30 s at most) until a client connects. */
  async start(): Promise<void> {
    const child = spawn(
      this.program,
      ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.storeDir],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child = child;
    child.stdout?.on('data', (b: Buffer) => {
      this.output += b.toString();
    });
    child.stderr?.on('data', (b: Buffer) => {
      this.output += b.toString();
    });
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`nats-server exited (${child.exitCode}):\n${this.output}`);
      try {
        const nc = await connect({ servers: this.url, timeout: 1000, reconnect: false });
        // JetStream answers once its store is recovered.
        await (await nc.jetstreamManager()).getAccountInfo();
        await nc.close();
        return;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(`nats-server did not answer: ${(err as Error).message}\n${this.output}`);
        await sleep(100);
      }
    }
  }

  /** SIGTERM by pid, then waits for the exit. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
    process.kill(child.pid, 'SIGTERM');
    await this.exited;
  }
}
