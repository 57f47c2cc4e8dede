// The dependency rule of docs/ARCHITECTURE.md, checked by `npm run depcheck` (and in CI).
// Production folders form one order, and imports only point down it:
//   core < models < idempotency < gateway < payments < events < routers < server
// events/ (the outbox's feed, the webhook sender, the NATS publisher) renders events with the
// resources' own transfer-object functions, so it sits above payments; routers/ registers the
// renderers of the resources it defines (routers/event-renderers.ts).
// Each layer's rule forbids every folder above it, so a cycle between folders cannot be written.
const LAYERS = ['core', 'models', 'idempotency', 'gateway', 'payments', 'events', 'routers', 'server'];
const PRODUCTION = `^(${LAYERS.join('|')})/`;

const above = (layer) => LAYERS.slice(LAYERS.indexOf(layer) + 1);

const layerRules = LAYERS.slice(0, -1).map((layer) => ({
  name: `${layer}-imports-down-only`,
  severity: 'error',
  comment: `${layer}/ may import only the layers below it (${LAYERS.slice(0, LAYERS.indexOf(layer)).join(', ') || 'none'})`,
  from: { path: `^${layer}/` },
  to: { path: `^(${above(layer).join('|')})/` },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A module cycle: the files cannot be read (or loaded) one after the other',
      from: { path: PRODUCTION },
      to: { circular: true },
    },
    {
      name: 'no-folder-cycle',
      severity: 'error',
      comment: 'A cycle between folders (subfolders of one layer included, e.g. routers/users and routers/payments)',
      scope: 'folder',
      from: { path: PRODUCTION },
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'gateway-imports-core-only',
      severity: 'error',
      comment: 'The payment gateway client and simulator know nothing of tables or the engine',
      from: { path: '^gateway/' },
      to: { path: '^(models|idempotency)/' },
    },
    {
      name: 'domain-knows-no-transport',
      severity: 'error',
      comment: 'Below routers/ nothing speaks tRPC or Express (the gateway talks HTTP to its peer: its job)',
      from: { path: '^(core|models|idempotency|payments)/' },
      to: { path: '(^|/)node_modules/(@trpc|trpc-to-openapi|express|pino-http|swagger-ui-dist)/' },
    },
    {
      name: 'production-never-imports-tests-or-tools',
      severity: 'error',
      comment: 'test/, bench/, scripts/ and client/ are built on the service, never the other way round',
      from: { path: PRODUCTION },
      to: { path: '^(test|bench|scripts|client)/' },
    },
    {
      name: 'client-imports-no-implementation',
      severity: 'error',
      comment: 'The shipped client knows the service by its types only (AppRouter, the OpenAPI paths)',
      from: { path: '^client/' },
      to: { path: '^(core|models|idempotency|gateway|payments|events|server|test|bench|scripts)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'deploy-stands-alone',
      severity: 'error',
      comment: 'deploy/ starts processes (the cluster, instances, nginx) by command line; it imports no service code',
      from: { path: '^deploy/' },
      to: { path: '^(core|models|idempotency|gateway|payments|events|routers|server|client|test|bench|scripts)/' },
    },
    {
      name: 'production-never-imports-deploy',
      severity: 'error',
      from: { path: PRODUCTION },
      to: { path: '^deploy/' },
    },
    {
      name: 'scripts-never-import-tests',
      severity: 'error',
      from: { path: '^scripts/' },
      to: { path: '^test/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};
