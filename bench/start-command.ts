/**
 * What `npm start` runs, so that the benchmark measures the same process a user starts: the start
 * script (package.json) builds with tsc, then `exec node <flags> dist/server/main.js`. The flags
 * (the heap limits) are read from that script, not repeated here.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface StartCommand {
  /** node's own flags from the start script (e.g. --max-old-space-size). */
  flags: string[];
  /** The built entry point, relative to the project root. */
  entry: string;
}

export function startCommand(): StartCommand {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
  const match = /exec node ((?:--\S+ )*)(dist\/\S+\.js)$/.exec(pkg.scripts.start ?? '');
  if (!match)
    throw new Error(
      `package.json's start script is not "… && exec node [flags] dist/….js": ${pkg.scripts.start}`,
    );
  return { flags: match[1].trim().split(/\s+/).filter(Boolean), entry: match[2] };
}

/**
 * Builds what `npm start` builds (npm run build), and the benchmark's preload (bench/probe.ts) next
 * to it in .tmp/probe/, so that no TypeScript loader runs in the measured process. Returns the probe.
 */
export function buildForBench(): string {
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.probe.json'], {
    stdio: 'inherit',
  });
  return './.tmp/probe/probe.js';
}
