import { accessSync, constants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The production configuration: tests and the scale probe run this file, not a copy of it. */
export const DEPLOY_CONF = path.resolve(import.meta.dirname, 'nginx.conf');

/** /usr/sbin/nginx, else `nginx` on PATH; undefined when nginx is not installed. */
export function findNginx(): string | undefined {
  const dirs = ['/usr/sbin', ...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean)];
  for (const dir of dirs) {
    const candidate = path.join(dir, 'nginx');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Replaces exactly one match: if deploy/nginx.conf drifts, rendering fails loudly instead of silently. */
function replaceOnce(text: string, pattern: RegExp, replacement: string): string {
  const flags = pattern.flags.includes('g') ? pattern.flags : `${pattern.flags}g`;
  const matches = text.match(new RegExp(pattern.source, flags)) ?? [];
  if (matches.length !== 1) {
    throw new Error(`deploy/nginx.conf: expected one match of ${pattern}, found ${matches.length}`);
  }
  return text.replace(pattern, replacement);
}

/**
 * deploy/nginx.conf with only the machine-specific parts replaced: the worker user, the main error
 * log (given on the command line instead), the listen address, the upstream server addresses (their
 * parameters such as max_fails are kept), the access log path, and temp paths inside `dir`.
 */
export function renderNginxConf(
  template: string,
  opts: { listenPort: number; upstreams: string[]; dir: string },
): string {
  let conf = template;
  // Workers of a root master need a user; root here, so that no permission on the temp dir matters.
  conf = replaceOnce(conf, /^user\s+[^;]+;$/m, os.userInfo().uid === 0 ? 'user root;' : '');
  conf = replaceOnce(conf, /^error_log\s+[^;]+;$/m, '');
  conf = replaceOnce(conf, /^([ \t]*)listen\s+\d+;$/m, `$1listen 127.0.0.1:${opts.listenPort};`);
  const block = /upstream idempotent_service \{[\s\S]*?\n {4}\}/.exec(conf);
  if (!block) throw new Error('deploy/nginx.conf: no `upstream idempotent_service` block');
  const servers = [...block[0].matchAll(/^([ \t]*)server[ \t]+[^\s;]+([^;]*);$/gm)];
  if (servers.length === 0) throw new Error('deploy/nginx.conf: the upstream block lists no server');
  const [, indent, params] = servers[0];
  const lines = opts.upstreams.map((address) => `${indent}server ${address}${params};`).join('\n');
  let upstream = block[0];
  servers.forEach((server, i) => {
    upstream = upstream.replace(server[0], i === 0 ? lines : '');
  });
  conf = conf.replace(block[0], upstream);
  conf = replaceOnce(
    conf,
    /^([ \t]*)access_log\s+\S+\s+upstream_json;$/m,
    `$1access_log ${path.join(opts.dir, 'access.log')} upstream_json;`,
  );
  const temps = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map((name) => `    ${name}_temp_path ${path.join(opts.dir, `${name}_temp`)};`)
    .join('\n');
  conf = replaceOnce(conf, /^http \{$/m, `http {\n${temps}`);
  return conf;
}
