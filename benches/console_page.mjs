// The console's figures in headless Chromium, for benches/console_page.rs: it built the
// data (LANES lanes, 10,000 tasks, task REVIEW_TASK with a 5,000-line diff on lane r),
// serves it at CONSOLE_URL, and answers `hold LANE` / `lift LANE` written here with the
// moment (Unix ms) it wrote that lane to the store. Every other line printed here is the
// report. Each figure is the median of ROUNDS, beside its baseline in the same page.
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

const require = createRequire(new URL('../tests/browser/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const env = process.env;
const base = env.CONSOLE_URL;
const lanes = Number(env.LANES);
const ROUNDS = 5;
const answers = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const ask = async (what) => { console.log(what); return Number((await answers.next()).value); };
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const report = (label, m, b, floor) => console.log(
  `${label}: ${m} ms against ${b} ms (${(m / Math.max(b, 1)).toFixed(1)}x the baseline); the issue's floor ${floor} ms: ${m <= floor ? 'met' : 'NOT met'}`);

const browser = await chromium.launch({
  executablePath: env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const ready = (page) => page.waitForFunction((n) => document.querySelectorAll('#lanes tr[data-lane]').length === n
  && document.querySelectorAll('#tasks tbody tr').length > 0, lanes, { polling: 'raf', timeout: 30000 });
try {
  // The page ready, against navigating to one of the server's static files.
  const load = [];
  const nav = [];
  let slow = '';
  for (let i = 0; i < ROUNDS; i++) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    let t = Date.now();
    await page.goto(`${base}app.css`);
    nav.push(Date.now() - t);
    t = Date.now();
    await page.goto(base);
    await ready(page);
    load.push(Date.now() - t);
    if (i === ROUNDS - 1) {
      // Where the time went: the slowest requests, from the navigation's start.
      slow = await page.evaluate(() => performance.getEntriesByType('resource')
        .map((e) => [new URL(e.name).pathname, Math.round(e.startTime), Math.round(e.duration)])
        .sort((x, y) => y[2] - x[2]).slice(0, 5)
        .map(([p, at, d]) => `${p} ${d} ms (from ${at} ms)`).join(', '));
    }
    await page.close();
  }
  report(`page ready (${lanes} lanes, 10,000 tasks)`, median(load), median(nav), 300);
  console.log(`  slowest requests of the last load: ${slow}`);

  // A lane held → its entry in the needs-you queue, against fetching the status.
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(base);
  await ready(page);
  const shown = [];
  const status = [];
  for (let i = 1; i <= ROUNDS; i++) {
    const lane = `l${String(i).padStart(2, '0')}`;
    const at = await ask(`hold ${lane}`);
    await page.waitForSelector(`#needs li[data-kind="held"][data-lane="${lane}"]`, { timeout: 10000 });
    shown.push(Date.now() - at);
    const t = Date.now();
    await page.evaluate(async () => (await fetch('/api/status')).json());
    status.push(Date.now() - t);
    await ask(`lift ${lane}`);
    await page.waitForSelector(`#needs li[data-lane="${lane}"]`, { state: 'detached', timeout: 10000 });
  }
  report('a lane held -> the needs-you queue', median(shown), median(status), 500);

  // The 5,000-line review interactive (its first line selected), against its JSON.
  const review = [];
  const json = [];
  for (let i = 0; i < ROUNDS; i++) {
    await page.goto(base);
    await ready(page);
    const t = Date.now();
    await page.click('#lanes tr[data-lane="r"] button.review');
    await page.click('#review-diff .file[data-path="big.rs"] td.pick[data-line="1"]');
    await page.waitForSelector('#review-diff tr.chosen');
    review.push(Date.now() - t);
    const t2 = Date.now();
    await page.evaluate(async (id) => (await fetch(`/api/tasks/${id}/review`)).json(), env.REVIEW_TASK);
    json.push(Date.now() - t2);
  }
  const lines = await page.evaluate(() => state.review.doc.files[0].hunks.reduce((n, h) => n + h.lines.length, 0));
  const drawn = await page.locator('#review-diff .block:not(.waiting)').count();
  const blocks = await page.locator('#review-diff .block').count();
  report(`review of a ${lines}-line diff interactive (${drawn} of ${blocks} blocks drawn)`, median(review), median(json), 1000);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  await cdp.send('HeapProfiler.collectGarbage');
  const metrics = (await cdp.send('Performance.getMetrics')).metrics;
  const heap = metrics.find((m) => m.name === 'JSHeapUsedSize').value;
  const nodes = await page.evaluate(() => document.getElementsByTagName('*').length);
  const sections = await page.evaluate(() => [...document.querySelectorAll('section[id]')]
    .map((x) => [x.id.replace(/-section$/, ''), x.getElementsByTagName('*').length])
    .sort((x, y) => y[1] - x[1]).slice(0, 4).map(([id, n]) => `${id} ${n}`).join(', '));
  console.log(`the page's JS heap with the review open: ${(heap / 1048576).toFixed(1)} MB (after a collection), ${nodes} elements (most: ${sections})`);
} finally {
  await browser.close();
}
process.exit(0);
