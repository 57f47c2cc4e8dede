import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import type { Config } from '../core/config.js';
import type { Jobs } from '../core/jobs.js';
import { NatsBus } from '../events/nats-bus.js';
import { NatsRelay, RELAY_DUPLICATE_WINDOW_MS } from '../events/nats-relay.js';
import { every, type PauseLog } from './background.js';

/** One run relays this long, then the next run (on whichever instance takes it) carries on. */
const RUN_MS = 10_000;
/** A run outliving this is taken as its instance's death (a run is RUN_MS plus one batch). */
const RELAY_EXPIRE_MS = 30_000;
/** The pause between two runs: the next run is due this long after the previous one ended. */
const BETWEEN_RUNS_MS = 250;

/**
 * With NATS_URL, the relay of the outbox to JetStream (events/nats-relay.ts) as a recurring job:
 * one run at a time across the instances, each run relaying for RUN_MS and reading the feed every
 * 250 ms while it has caught up. Without NATS_URL, nothing.
 */
export async function startNatsRelay(deps: {
  config: Config;
  jobs: Jobs;
  pauses: PauseLog;
  sequelize: Sequelize;
  logger: Logger;
}): Promise<void> {
  const { config, jobs, pauses, sequelize, logger } = deps;
  const servers = config.NATS_URL;
  if (!servers) return;
  const relay = new NatsRelay({
    sequelize,
    logger,
    runMs: RUN_MS,
    connect: () =>
      NatsBus.connect({
        servers,
        duplicateWindowMs: RELAY_DUPLICATE_WINDOW_MS,
        maxAgeMs: config.EVENT_RETENTION_DAYS * 24 * 3_600_000,
        connectTimeoutMs: 5000,
      }),
  });
  await every(
    jobs,
    pauses,
    'nats-relay',
    { intervalMs: BETWEEN_RUNS_MS, expireInMs: RELAY_EXPIRE_MS },
    (signal) => relay.run(signal),
  );
}
