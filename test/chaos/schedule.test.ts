import { expect } from 'chai';
import { FAILPOINT_NAMES, parseFailpoints } from '../../core/failpoints.js';
import {
  describeFault,
  drawSchedule,
  FAILPOINT_FAULTS,
  FAILPOINT_STRIDE,
  IGNORE_KEY_FAULT,
  type ScheduledFault,
  type ScheduledKind,
} from './schedule.js';

/**
 * The chaos schedule is a value drawn from the seed (test/chaos/schedule.ts), before any process
 * runs: these checks need none.
 */
describe('chaos schedule: drawn from the seed alone', () => {
  const options = { instances: 3 };

  it('when the same seed is drawn twice, then the schedule is the same, fault for fault; different seeds give different schedules', () => {
    for (const seed of [0, 11, 12, 42, 1000, 4294967295]) {
      const a = drawSchedule(seed, 60000, options);
      expect(a.length, `seed ${seed}`).to.be.greaterThan(5);
      expect(drawSchedule(seed, 60000, options)).to.deep.equal(a);
    }
    const lines = new Set<string>();
    for (let seed = 0; seed < 50; seed++)
      lines.add(drawSchedule(seed, 60000, options).map(describeFault).join('\n'));
    expect(lines.size, 'distinct schedules among 50 seeds').to.equal(50);
  });

  it('when a shorter run is drawn from the same seed, then it is a prefix of the longer one (faults do not depend on how long the run is)', () => {
    const long = drawSchedule(7, 60000, options);
    const short = drawSchedule(7, 12000, options);
    expect(short.length).to.be.greaterThan(0);
    expect(long.slice(0, short.length)).to.deep.equal(short);
  });

  it('when a kind is left out, then the other faults are drawn exactly as without the option', () => {
    const all = drawSchedule(3, 60000, options);
    const without = drawSchedule(3, 60000, { ...options, without: ['sigkill', 'pg-restart'] });
    expect(without).to.deep.equal(all.filter((f) => f.kind !== 'sigkill' && f.kind !== 'pg-restart'));
  });

  it("when a schedule is drawn, then its gaps and holds fill the duration, and every fault's target, hold and settings are within the run's bounds", () => {
    for (let seed = 0; seed < 20; seed++) {
      const faults = drawSchedule(seed, 60000, options);
      const nominal = faults.reduce((t, f) => t + f.gapMs + (f.holdMs ?? 0), 0);
      // Drawing stops at the first gap that ends past the duration: only the last hold may overrun it.
      const longestHold = Math.max(
        2500,
        ...[...FAILPOINT_FAULTS, IGNORE_KEY_FAULT].map((fp) => fp.minHoldMs ?? 0),
      );
      expect(nominal, `seed ${seed}`).to.be.at.most(60000 + longestHold);
      for (const f of faults) {
        expect(f.gapMs).to.be.within(800, 2500);
        if (f.instance !== undefined) expect(f.instance).to.be.within(0, 2);
        if (f.failpoint) expect(f.holdMs).to.be.at.least(f.failpoint.minHoldMs ?? 0);
      }
    }
  });

  it('when the fault list is read, then every failpoint of core/failpoints.ts is armed by some fault and every specification parses', () => {
    const specs = [...FAILPOINT_FAULTS, IGNORE_KEY_FAULT].flatMap((f) => [f.spec, f.others ?? '']);
    const armed = new Set(specs.flatMap((spec) => [...parseFailpoints(spec).keys()]));
    expect([...FAILPOINT_NAMES].filter((name) => !armed.has(name))).to.deep.equal([]);
  });

  it('when 30 seeds of 60 s are drawn (the half-hour run), then every fault kind is drawn', () => {
    const drawn: ScheduledFault[] = [];
    for (let seed = 1000; seed < 1030; seed++) drawn.push(...drawSchedule(seed, 60000, options));
    const kinds = new Set<ScheduledKind>(drawn.map((f) => f.kind));
    for (const kind of [
      'sigkill',
      'sigstop',
      'failpoint',
      'gateway-5xx',
      'gateway-latency',
      'gateway-timeout-after-charge',
      'gateway-reset-after-charge',
      'gateway-decline',
      'gateway-ignore-key',
      'gateway-unreachable',
      'db-connections-dropped',
      'pg-restart',
    ] as const)
      expect(kinds.has(kind), kind).to.equal(true);
  });

  it('when as many consecutive seeds as there are failpoint faults are drawn, from any first seed, then every failpoint fault is armed', () => {
    const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
    expect(gcd(FAILPOINT_STRIDE, FAILPOINT_FAULTS.length), 'stride prime to the list').to.equal(1);
    for (const first of [0, 11, 1000, 2000, 123457]) {
      const armed = new Set<unknown>();
      for (let seed = first; seed < first + FAILPOINT_FAULTS.length; seed++)
        for (const f of drawSchedule(seed, 60000, options))
          if (f.kind === 'failpoint') armed.add(f.failpoint);
      const missing = FAILPOINT_FAULTS.filter((fp) => !armed.has(fp)).map((fp) => fp.spec);
      expect(missing, `seeds ${first}..${first + FAILPOINT_FAULTS.length - 1}`).to.deep.equal([]);
    }
  });
});
