// Loaded with `node --import` into a service process (NODE_OPTIONS) to give it a clock off by
// CLOCK_SKEW_MS: instances whose clocks disagree, without touching the machine's clock.
const skew = Number(process.env.CLOCK_SKEW_MS ?? 0);
const RealDate = globalThis.Date;
class SkewedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(RealDate.now() + skew);
    else super(...args);
  }
  static now() {
    return RealDate.now() + skew;
  }
}
globalThis.Date = SkewedDate;
