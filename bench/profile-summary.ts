/**
 * Summarises V8 CPU profiles (`node --cpu-prof`): self time by component (each node_modules
 * package, this repository's folders, node internals, GC, idle) and the hottest functions.
 * Used by `npm run bench -- --profile`; also runnable alone:
 *   node --import tsx bench/profile-summary.ts <dir-or-file.cpuprofile>...
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /**
   * Share of non-idle time, by component. Native code and node internals are charged to the
   * nearest caller that is a package or this repository (so OpenSSL work called by jsonwebtoken
   * counts as jsonwebtoken, a socket write issued by pg counts as pg); only what no package called
   * (event loop, timers) stays under node.
   */
  components: Array<{ component: string; ms: number; share: number }>;
  functions: Array<{ fn: string; component: string; ms: number; share: number }>;
}

function componentOf(url: string, name: string): string {
  if (name === '(idle)') return '(idle)';
  if (name === '(garbage collector)') return '(gc)';
  if (name === '(program)') return '(program)';
  if (!url) return '(native)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  if (url.startsWith('node:')) return 'node:internals';
  const repo = /\/(server|routers|idempotency|models|gateway|bench)\//.exec(url);
  if (repo) return `app:${repo[1]}`;
  return 'other';
}

export function summarise(profile: Profile, file: string): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const own = (id: number): string => {
    const first = byId.get(id);
    if (!first) return 'node';
    const c0 = componentOf(first.callFrame.url, first.callFrame.functionName);
    if (c0.startsWith('(') && c0 !== '(native)') return c0;
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const n = byId.get(cur);
      if (!n) break;
      const c = componentOf(n.callFrame.url, n.callFrame.functionName);
      if (c !== '(native)' && c !== 'node:internals' && c !== 'other' && !c.startsWith('(')) return c;
    }
    return 'node';
  };
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const comp = new Map<string, number>();
  const fns = new Map<string, { component: string; us: number }>();
  let busy = 0;
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const c = componentOf(url, functionName);
    const owner = own(id);
    comp.set(owner, (comp.get(owner) ?? 0) + us);
    if (c !== '(idle)') busy += us;
    const where = url
      ? `${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(?=server|routers|idempotency|models|gateway|bench)/, '')}:${lineNumber + 1}`
      : '';
    const key =
      `${functionName || '(anonymous)'} ${where}`.trim() +
      (where || functionName.startsWith('(') ? '' : ` [called by ${owner}]`);
    const f = fns.get(key) ?? { component: c, us: 0 };
    f.us += us;
    fns.set(key, f);
  }
  const share = (us: number) => (busy > 0 ? us / busy : 0);
  return {
    file,
    totalMs: (profile.endTime - profile.startTime) / 1000,
    components: [...comp.entries()]
      .filter(([c]) => c !== '(idle)')
      .map(([component, us]) => ({ component, ms: us / 1000, share: share(us) }))
      .sort((a, b) => b.ms - a.ms),
    functions: [...fns.entries()]
      .filter(([, f]) => f.component !== '(idle)')
      .map(([fn, f]) => ({ fn, component: f.component, ms: f.us / 1000, share: share(f.us) }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 30),
  };
}

export async function summariseProfiles(
  target: string,
  log: (line: string) => void = console.log,
): Promise<ProfileSummary[]> {
  const files = (await stat(target)).isDirectory()
    ? (await readdir(target)).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(target, f))
    : [target];
  const out: ProfileSummary[] = [];
  for (const file of files) {
    const s = summarise(JSON.parse(await readFile(file, 'utf8')) as Profile, file);
    out.push(s);
    log(
      `CPU profile ${file} (${(s.totalMs / 1000).toFixed(1)}s): busy CPU by component (native work charged to its caller)`,
    );
    for (const c of s.components.slice(0, 15))
      log(`  ${(c.share * 100).toFixed(1).padStart(5)}%  ${c.ms.toFixed(0).padStart(7)} ms  ${c.component}`);
    log('  hottest functions:');
    for (const f of s.functions.slice(0, 20)) log(`  ${(f.share * 100).toFixed(1).padStart(5)}%  ${f.fn}`);
  }
  return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const target of process.argv.slice(2)) await summariseProfiles(target);
}
