/**
 * zod meta that replaces what a schema's generated JSON Schema says with `jsonSchema`: for schemas
 * whose rule is a transform or a pipe (which JSON Schema cannot see), so that the OpenAPI document
 * says exactly what the schema enforces, written next to the rule it describes.
 */
export function documentedAs(jsonSchema: Record<string, unknown>) {
  return {
    override: ({ jsonSchema: generated }: { jsonSchema: Record<string, unknown> }) => {
      for (const key of Object.keys(generated)) delete generated[key];
      Object.assign(generated, jsonSchema);
    },
  };
}
