import { spawn } from 'node:child_process';
import { TEST_ENV } from './server.js';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `npm run reconcile -- <args>` as a real process on the given database and gateway (undefined: no
 * PAYMENT_GATEWAY_URL, i.e. the bundled simulator).
 */
export function reconcileCli(
  databaseUrl: string,
  gatewayUrl: string | undefined,
  args: string[],
): Promise<CliRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/reconcile-cli.ts', ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      ...TEST_ENV,
      LOG_LEVEL: 'silent',
      DATABASE_URL: databaseUrl,
      ...(gatewayUrl ? { PAYMENT_GATEWAY_URL: gatewayUrl } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}
