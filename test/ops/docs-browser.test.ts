import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { type Browser, chromium } from 'playwright-core';
import { sharedServer } from '../support/server.js';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = fileURLToPath(new URL('../../test-output/docs.png', import.meta.url));

describe('ops: the /docs page in a real browser (Chromium via playwright-core)', () => {
  let browser: Browser | undefined;

  before(async function () {
    this.timeout(60000);
    if (!existsSync(CHROMIUM)) {
      // CI is meant to install it; a developer machine without it skips instead of failing.
      console.warn(`      skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`);
      this.skip();
    }
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });

  after(async () => {
    await browser?.close();
  });

  it('when /docs is opened, then Swagger UI lists the operations, loads nothing off loopback, and a screenshot is written', async function () {
    if (!browser) this.skip();
    this.timeout(60000);
    const { url } = await sharedServer();
    const page = await browser!.newPage();
    try {
      const requested: string[] = [];
      page.on('request', (request) => requested.push(request.url()));
      // Requests off loopback are recorded (and fail the test below) but never sent: the run stays offline.
      await page.route('**/*', (route) =>
        route.request().url().startsWith(`${url}/`) ? route.continue() : route.abort(),
      );
      const errors: string[] = [];
      page.on('pageerror', (err) => errors.push(err.message));

      const res = await page.goto(`${url}/docs`, { waitUntil: 'load' });
      expect(res?.status()).to.equal(200);
      await page.waitForSelector('.opblock .opblock-summary-path', { timeout: 30000 });
      const operations = await page.$$eval('.opblock', (blocks) =>
        blocks.map((b) => {
          const method = b.querySelector('.opblock-summary-method')?.textContent?.trim() ?? '';
          // A deprecated operation (the seed's aliases) is drawn with another class and no data-path.
          const el = b.querySelector('.opblock-summary-path, .opblock-summary-path__deprecated');
          const path = el?.getAttribute('data-path') ?? el?.textContent?.trim().replace(/\u200b/g, '') ?? '';
          return `${method} ${path}`;
        }),
      );
      expect(operations).to.include.members([
        'POST /api/v1/payments',
        'GET /api/v2/users',
        'POST /api/v1/tokens',
        'DELETE /api/v1/users/{id}',
      ]);
      expect(operations.length).to.equal(new Set(operations).size);
      expect(await page.title()).to.match(/API/);

      await mkdir(new URL('../../test-output/', import.meta.url), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(existsSync(SCREENSHOT)).to.equal(true);

      expect(requested).to.include(`${url}/openapi.json`);
      // data: URLs (inline images of the stylesheet) never leave the machine either.
      const offLoopback = requested.filter((u) => !u.startsWith(`${url}/`) && !u.startsWith('data:'));
      expect(offLoopback, 'requests that left the service').to.deep.equal([]);
      expect(errors, 'page errors').to.deep.equal([]);
    } finally {
      await page.close();
    }
  });
});
