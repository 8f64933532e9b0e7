// Real-browser checks of a lane's terminal view in headless Chromium, driven by
// tests/serve_browser.rs (the_terminal_in_headless_chromium), which starts a fleet
// whose lane `a` runs the demo agent waiting for the operator's go-ahead, and
// `spice serve`. Exits non-zero on the first failure.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const env = process.env;
const URL = env.CONSOLE_URL;
const spice = (...args) => execFileSync(env.SPICE_BIN, args, { cwd: env.REPO, env, encoding: 'utf8' });
const step = (what) => console.log(`- ${what}`);
const ledger = (kind) => JSON.parse(spice('task', 'show', env.TASK_ID, '--json')).ledger.filter((e) => e.kind === kind);
const laneA = () => JSON.parse(spice('fleet', 'status', '--json')).lanes.find((l) => l.lane === 'a');
const until = async (what, f, secs = 15) => {
  for (let t = Date.now(); Date.now() - t < secs * 1000; await new Promise((r) => setTimeout(r, 100))) {
    if (f()) return;
  }
  assert.fail(`timed out waiting for ${what}`);
};

const browser = await chromium.launch({
  executablePath: env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // The refused keys' 409 is logged by the browser itself; anything else is a problem.
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 409/.test(m.text())) problems.push(`console: ${m.text()}`); });
  // Every content-security-policy violation, however the page caused it.
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective}: ${e.blockedURI} ${e.sample}`));
  });
  // What the terminal shows: the rows on screen, and its whole buffer (scrollback too).
  const rows = () => page.$eval('#terminal .xterm-rows', (e) => e.textContent.replace(/\u00a0/g, ' '));
  const buffer = () => page.evaluate(() => {
    const b = term.xterm.buffer.active;
    const lines = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
    return lines.join('\n');
  });
  const shows = (text, timeout = 15000) => page.waitForFunction((t) => document.querySelector('#terminal .xterm-rows')
    .textContent.replace(/\u00a0/g, ' ').includes(t), text, { timeout });
  const openTerminal = async () => {
    await page.goto(URL);
    await page.waitForSelector('#lanes tr[data-lane="a"] button.terminal');
    await page.click('#lanes tr[data-lane="a"] button.terminal');
    await page.waitForSelector('#terminal .xterm-rows');
    await page.waitForFunction(() => !document.querySelector('#terminal-keyboard').disabled, null, { timeout: 15000 });
  };

  step('the lane\'s terminal opens from its row and shows the agent\'s screen, scrollback first');
  await openTerminal();
  await shows('go-ahead');
  assert.match(await buffer(), new RegExp(`task demo-${env.TASK_ID}`));
  assert.match(await page.textContent('#terminal-banner'), /Read-only/);
  assert.equal(await page.textContent('#terminal-keyboard'), 'Take the keyboard');
  if (env.SCREENSHOTS) await page.locator('#terminal-section').screenshot({ path: `${env.SCREENSHOTS}/terminal-read-only.png` });

  step('read-only: keys typed into it reach nothing, and the server refuses them too');
  await page.click('#terminal');
  await page.keyboard.type('go ahead');
  await page.keyboard.press('Enter');
  const refused = await page.evaluate(async () => (await post(`/api/lanes/a/terminal/input`, { page: term.page, data: 'go ahead\r' })).body.error);
  assert.match(refused, /read-only: take the keyboard first/);
  await page.waitForTimeout(500);
  assert.ok(!(await rows()).includes('go ahead'), 'nothing was echoed');
  assert.equal(laneA().state, 'waiting');
  assert.deepEqual(ledger('keyboard_taken'), []);

  step('taking the keyboard is recorded in the task\'s ledger, and giving it back too');
  await page.click('#terminal-keyboard');
  await page.waitForFunction(() => document.querySelector('#terminal-keyboard').textContent === 'Release the keyboard');
  assert.match(await page.textContent('#terminal-banner'), /You have the keyboard of lane a/);
  assert.equal(ledger('keyboard_taken').length, 1);
  await page.click('#terminal-keyboard');
  await page.waitForFunction(() => document.querySelector('#terminal-keyboard').textContent === 'Take the keyboard');
  assert.deepEqual(ledger('keyboard_released').map((e) => e.detail.why), ['released']);

  step('while held, the agent\'s terminal follows the operator\'s window');
  await page.click('#terminal-keyboard');
  await page.waitForFunction(() => document.querySelector('#terminal-keyboard').textContent === 'Release the keyboard');
  const cast = laneA().recording;
  const sized = async () => {
    const { cols, rows: r } = await page.evaluate(() => ({ cols: term.xterm.cols, rows: term.xterm.rows }));
    await until(`the size ${cols}x${r} in the recording`, () => readFileSync(cast, 'utf8').includes(`"r","${cols}x${r}"`));
    return cols;
  };
  const wide = await sized();
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction((w) => term.xterm.cols < w, wide, { timeout: 5000 });
  const narrow = await sized();
  assert.ok(narrow < wide, `${narrow} columns at 390 px, ${wide} at 1280`);
  await page.setViewportSize({ width: 1280, height: 900 });

  step('leaving the page gives the keyboard back');
  await page.goto('about:blank');
  await until('the release on leaving', () => ledger('keyboard_released').length === 2);
  assert.equal(laneA().state, 'waiting', 'nothing was typed');

  step('with the keyboard taken, typed keys reach the agent, which goes on live');
  await openTerminal();
  await shows('go-ahead');
  await page.click('#terminal-keyboard');
  await page.waitForFunction(() => document.querySelector('#terminal-keyboard').textContent === 'Release the keyboard');
  await page.click('#terminal');
  await page.keyboard.type('go ahead');
  await page.keyboard.press('Enter');
  await shows('go ahead');
  await shows('$ git status --short', 30000);
  if (env.SCREENSHOTS) await page.screenshot({ path: `${env.SCREENSHOTS}/terminal-desktop.png` });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.scrollWidth <= 390, null, { timeout: 5000 })
    .catch(async () => assert.fail(`the page scrolls sideways at 390 px: ${await page.evaluate(() => document.documentElement.scrollWidth)} px wide`));
  await page.locator('#terminal-section').scrollIntoViewIfNeeded();
  if (env.SCREENSHOTS) await page.screenshot({ path: `${env.SCREENSHOTS}/terminal-phone.png` });

  step('the session\'s end reaches the page and releases the keyboard');
  await page.waitForFunction(() => /ended|nothing listens/.test(document.querySelector('#terminal-state').textContent), null, { timeout: 60000 });
  assert.equal(await page.textContent('#terminal-keyboard'), 'Take the keyboard');
  await until('the release at the end', () => ledger('keyboard_released').some((e) => e.detail.why === 'session ended'));
  assert.match(await buffer(), /phase is complete/);

  step('xterm.js keeps its colours under the CSP, which nothing violated');
  const colours = await page.evaluate(async () => {
    const box = document.createElement('div');
    box.style.width = '400px';
    box.style.height = '80px';
    document.body.append(box);
    const t = new Terminal();
    t.open(box);
    await new Promise((ok) => t.write('\x1b[31mP\x1b[38;2;1;2;3mT\x1b[0m', ok));
    await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
    const colour = (ch) => [...box.querySelectorAll('.xterm-rows span')].filter((s) => s.textContent === ch)
      .map((s) => getComputedStyle(s).color)[0];
    const out = { palette: colour('P'), truecolour: colour('T') };
    t.dispose();
    box.remove();
    return out;
  });
  assert.equal(colours.truecolour, 'rgb(1, 2, 3)');
  assert.notEqual(colours.palette, colours.truecolour);
  assert.notEqual(colours.palette, 'rgb(0, 0, 0)');
  assert.deepEqual(await page.evaluate(() => window.__csp), []);
  assert.equal(await page.locator('#terminal img, #terminal script').count(), 0);

  assert.deepEqual(problems, []);
  console.log('terminal checks passed');
} finally {
  await browser.close();
}
