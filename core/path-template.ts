/**
 * Path templates of the REST routes (`/api/v1/users/{id}`). One reading of the `{name}` syntax for
 * everything that fills or inspects one: the fingerprint's canonical path, the alias rewrite and the
 * REST facade's body check.
 */
const PARAM = /\{(.+?)\}/g;

/** The parameter names of a template, in order. */
export function templateParams(template: string): string[] {
  return [...template.matchAll(PARAM)].map((m) => m[1]);
}

/** The template with each `{name}` replaced by `valueFor(name)` (the caller encodes the value). */
export function fillTemplate(template: string, valueFor: (name: string) => string): string {
  return template.replace(PARAM, (_, name: string) => valueFor(name));
}
