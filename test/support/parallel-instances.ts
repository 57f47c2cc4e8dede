import { type Instance, startInstance } from './processes.js';

/**
 * Like startInstances, but only the first one starts alone (it applies the migrations); the others
 * start together, which keeps multi-instance suites short. All are killed by killAll() as usual.
 */
export async function startInstancesInParallel(
  n: number,
  env: Record<string, string> = {},
): Promise<Instance[]> {
  if (n < 1) return [];
  const first = await startInstance(env);
  const rest = await Promise.all(Array.from({ length: n - 1 }, () => startInstance(env)));
  return [first, ...rest];
}
