import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { QueryTypes } from 'sequelize';
import { createIsolatedDatabase, type IsolatedDatabase } from '../support/isolated-database.js';
import { type Instance, startInstances } from '../support/processes.js';

const QUEUE = 'effect-recoverer-every-200ms';

interface Run {
  state: string;
  started: Date | null;
  completed: Date | null;
}

async function recovererRuns(instance: Instance): Promise<number> {
  const text = await (await fetch(`${instance.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('payment_recoverer_runs_total{result="ok"}'));
  return Number(line?.split(' ')[1] ?? 0);
}

describe('recurring jobs over two real instances (the effect recoverer every 200 ms)', function () {
  this.timeout(120000);
  let db: IsolatedDatabase;
  let instances: Instance[] = [];
  // The second instance's first add may land during a run of the first's: the one overlap allowed.
  let settled: Date;

  before(async () => {
    db = await createIsolatedDatabase('ticks');
    instances = await startInstances(2, { DATABASE_URL: db.url, RECOVERER_INTERVAL_MS: '200' });
    settled = new Date(Date.now() + 1000);
  });
  after(async () => {
    await Promise.all(instances.map((i) => i.stop()));
    await db?.drop();
  });

  it('when both instances run the recoverer, then every run is a job of the library, past the start-up runs never overlap, and the chain goes on (a run pending or running, never two pending)', async () => {
    const jobs = () =>
      db.sequelize.query<Run>(
        'SELECT state, started_on AS started, completed_on AS completed FROM pgboss.job WHERE name = $1 ORDER BY started_on',
        { bind: [QUEUE], type: QueryTypes.SELECT },
      );
    const deadline = Date.now() + 60000;
    const late = (j: Run) => j.state === 'completed' && (j.started?.getTime() ?? 0) > settled.getTime();
    while ((await jobs()).filter(late).length < 10 && Date.now() < deadline) await sleep(200);
    const counted = (await Promise.all(instances.map(recovererRuns))).reduce((a, b) => a + b, 0);
    const all = await jobs();
    const ran = all.filter((j) => j.state === 'completed' || j.state === 'active');
    expect(ran.length).to.be.at.least(10);
    // A run is counted (metrics) before its job completes: every counted run is one of these jobs.
    expect(counted).to.be.at.most(ran.length);
    const done = all.filter(late);
    expect(done.length).to.be.at.least(10);
    for (let i = 1; i < done.length; i++) {
      expect(done[i]?.started?.getTime(), 'a run started before the previous one ended').to.be.at.least(
        done[i - 1]?.completed?.getTime() ?? 0,
      );
    }
    // A run adds its successor just before it completes: while it runs, it is the chain's only job.
    const pending = all.filter((j) => j.state === 'created' || j.state === 'retry');
    expect(pending.length).to.be.at.most(1);
    expect(pending.length + all.filter((j) => j.state === 'active').length).to.be.at.least(1);
  });
});
