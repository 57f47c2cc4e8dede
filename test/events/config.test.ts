import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../core/config.js';

describe('configuration of events (CONTRACT section 8)', () => {
  it('when nothing is set, then the defaults of the table apply and there is no bus', () => {
    const config = loadConfig({});
    expect(config).to.deep.include({
      WEBHOOK_TIMEOUT_MS: 5000,
      WEBHOOK_MAX_ATTEMPTS: 12,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: '0',
      EVENT_RETENTION_DAYS: 30,
    });
    expect(config.NATS_URL).to.equal(undefined);
  });

  it('accepts one NATS server or a comma-separated list', () => {
    expect(loadConfig({ NATS_URL: 'nats://127.0.0.1:4222' }).NATS_URL).to.equal('nats://127.0.0.1:4222');
    expect(loadConfig({ NATS_URL: 'nats://a:4222,tls://b:4222' }).NATS_URL).to.equal(
      'nats://a:4222,tls://b:4222',
    );
  });

  it('when every new variable is invalid, then one message names each', () => {
    let message = '';
    try {
      loadConfig({
        WEBHOOK_TIMEOUT_MS: '0',
        WEBHOOK_MAX_ATTEMPTS: 'many',
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'yes',
        NATS_URL: 'http://127.0.0.1:4222',
        EVENT_RETENTION_DAYS: '-1',
      });
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      message = (err as Error).message;
    }
    for (const name of [
      'WEBHOOK_TIMEOUT_MS:',
      'WEBHOOK_MAX_ATTEMPTS:',
      'WEBHOOK_ALLOW_PRIVATE_NETWORKS:',
      'NATS_URL:',
      'EVENT_RETENTION_DAYS:',
    ])
      expect(message).to.include(name);
  });
});
