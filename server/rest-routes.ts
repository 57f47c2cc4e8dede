import { getPathRegExp } from 'trpc-to-openapi';

export interface RestRoute {
  template: string;
  canonical: string;
  regex: RegExp;
  methods: string[];
}

/**
 * The seed's unversioned paths: routed to the canonical v1 path's procedure, for the listed methods
 * only (CONTRACT section 3). Everything else about them (validation, auth, idempotency) is the
 * canonical procedure's.
 */
export const ALIASES: Array<{ alias: string; canonical: string; methods: string[] }> = [
  { alias: '/api/users', canonical: '/api/v1/users', methods: ['GET', 'POST'] },
  { alias: '/api/users/{id}', canonical: '/api/v1/users/{id}', methods: ['GET', 'DELETE'] },
  { alias: '/users/{id}/status', canonical: '/api/v1/users/{id}/status', methods: ['PUT'] },
  { alias: '/orders', canonical: '/api/v1/orders', methods: ['POST'] },
  { alias: '/orders/{id}', canonical: '/api/v1/orders/{id}', methods: ['GET'] },
  { alias: '/payments', canonical: '/api/v1/payments', methods: ['POST'] },
  { alias: '/payments/{id}', canonical: '/api/v1/payments/{id}', methods: ['GET'] },
];

/**
 * Paths described in the document but not procedures: the probes (server/health.ts) and the export's
 * file (server/export-file.ts, a plain route: a raw body).
 */
const PROBES = ['/healthz', '/readyz', '/api/v1/exports/{id}/file'];

/** Builds the route table from the generated OpenAPI paths (the procedures), plus live aliases. */
export function buildRouteTable(paths: Record<string, object>): RestRoute[] {
  // The document also describes the aliases and the probes; routes come from the procedures' paths.
  const served = Object.entries(paths).filter(
    ([template]) => !ALIASES.some((a) => a.alias === template) && !PROBES.includes(template),
  );
  const routes: RestRoute[] = served.map(([template, ops]) => ({
    template,
    canonical: template,
    regex: getPathRegExp(template),
    methods: Object.keys(ops).map((m) => m.toUpperCase()),
  }));
  for (const a of ALIASES) {
    const target = routes.find((r) => r.template === a.canonical);
    const methods = a.methods.filter((m) => target?.methods.includes(m));
    if (methods.length > 0) {
      routes.push({ template: a.alias, canonical: a.canonical, regex: getPathRegExp(a.alias), methods });
    }
  }
  return routes;
}

/** The route of a path, with its path parameters as they stand in the URL (one match per route tried). */
export function matchRoute(
  routes: RestRoute[],
  path: string,
): { route: RestRoute; params: Record<string, string> } | undefined {
  for (const route of routes) {
    const match = route.regex.exec(path);
    if (match) return { route, params: { ...match.groups } };
  }
  return undefined;
}
