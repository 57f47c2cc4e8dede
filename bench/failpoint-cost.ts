/**
 * `node --import tsx bench/failpoint-cost.ts`: what a disabled failpoint costs. The service calls at
 * most 8 per request (a payment: Tx 1, charge before/after, Tx 2 before/after, ...), so the cost per
 * request is 8 × the figure printed, to be set against the ~2 ms of CPU a request takes.
 */
import { failpoint } from '../core/failpoints.js';

const N = 5_000_000;
async function baseline(): Promise<void> {}
for (let round = 0; round < 3; round++) {
  let t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await baseline();
  const empty = Number(process.hrtime.bigint() - t) / N;
  t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await failpoint('payment.charge.before');
  const disabled = Number(process.hrtime.bigint() - t) / N;
  console.log(
    `round ${round + 1}: await of an empty async function ${empty.toFixed(1)} ns; await failpoint() disabled ${disabled.toFixed(1)} ns; 8 per request: ${((8 * disabled) / 1000).toFixed(2)} µs`,
  );
}
