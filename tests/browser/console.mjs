// Real-browser checks of the spice console in headless Chromium, driven by
// tests/serve_browser.rs, which prepares the store, starts `spice serve` and passes
// what it made through the environment. Exits non-zero on the first failure.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';

const env = process.env;
const URL = env.CONSOLE_URL;
const spice = (...args) => execFileSync(env.SPICE_BIN, args, { cwd: env.REPO, env, encoding: 'utf8' });
const step = (what) => console.log(`- ${what}`);
const claudeLine = (n, text) => JSON.stringify({
  type: 'assistant', uuid: `b${n}`, parentUuid: null, sessionId: 'sess-a', cwd: '/tmp', version: '2.1.0',
  timestamp: '2026-11-29T12:00:00.000Z',
  message: { role: 'assistant', id: `bm${n}`, content: [{ type: 'text', text }] },
}) + '\n';

const browser = await chromium.launch({
  executablePath: env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const problems = [];
try {
  const page = await browser.newPage();
  // Dialogs are problems, except the ones a step expects (its answers, in order).
  const answers = [];
  page.on('dialog', (d) => {
    if (answers.length) {
      const a = answers.shift();
      if (a === false) d.dismiss(); else d.accept(a === true ? undefined : a);
      return;
    }
    problems.push(`a dialog opened: ${d.message()}`); d.dismiss();
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // The refused takeover's 409 is logged by the browser itself; anything else is a problem.
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 409/.test(m.text())) problems.push(`console: ${m.text()}`); });

  step('the page loads with the store\'s data');
  await page.goto(URL);
  await page.waitForSelector('#lanes tr[data-lane="a"]');
  await page.waitForSelector('#conn.on');
  const laneText = await page.textContent('#lanes tr[data-lane="a"]');
  assert.match(laneText, new RegExp(env.STALE_HANDLE));
  assert.match(laneText, /working/);
  await page.waitForSelector(`#claims tr[data-task="${env.STALE_ID}"]`);
  assert.equal(await page.locator('#claims tbody tr').count(), 3);
  assert.ok(await page.locator(`#claims tr[data-task="${env.STALE_ID}"].stale-row`).count(), 'stale claim highlighted');
  await page.waitForSelector('#graph-box svg g.node');
  assert.equal(await page.isChecked('#speak'), false, 'speech is off by default');
  // Issue #14: a lane's error was a bare red "error", its reason only in a tooltip.
  await page.waitForSelector('#lanes tr[data-lane="b"] .err');
  assert.match(await page.textContent('#lanes tr[data-lane="b"] .err'),
    /error: agent exited with status 127: claude: command not found/);
  assert.ok(await page.locator('#lanes tr[data-lane="b"] .err').isVisible());

  step('the gates panel: the lane\'s refused commit, its finding and the latched file');
  await page.waitForSelector('#gates tr[data-gate-lane="a"].gate-hot');
  const gateRow = await page.textContent('#gates tr[data-gate-lane="a"]');
  assert.match(gateRow, /refused/);
  assert.match(gateRow, /file\.lines 40 > 15 \(latched\): 40 lines, past the flex ceiling 15/);
  assert.match(gateRow, /<img src=x onerror=/, 'a hostile file name is shown as text');
  assert.match(await page.textContent('#lanes tr[data-lane="a"] .gate-flag'), /commit refused by the gate/);
  await page.waitForSelector('#latches tbody tr');
  const latch = await page.textContent('#latches tbody tr');
  assert.match(latch, /file\.lines/);
  assert.match(latch, /12/);
  assert.equal(await page.locator('#gates img, #latches img').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);

  step('a lane that needs the operator: named so, its question shown, counted in the title');
  await page.waitForSelector('#lanes tr[data-lane="d"] .state-note');
  const asking = await page.textContent('#lanes tr[data-lane="d"]');
  assert.match(asking, /needs you/);
  assert.match(asking, /Should I keep <b>the alias<\/b>\?/, 'the question is shown as text');
  // Lane d asks, lane c is held at its budget, lane b failed, lane a's claim is stale:
  // the title counts the queue of what needs the operator.
  await page.waitForFunction(() => document.title === '(4) spice console');
  assert.equal(await page.isChecked('#notify'), false, 'browser notifications are opt-in');

  step('the needs-you queue leads the page, most urgent first, each with its control');
  await page.waitForSelector('#needs li[data-kind="stale_claim"]');
  const kinds = await page.$$eval('#needs li', (lis) => lis.map((li) => `${li.dataset.kind}:${li.dataset.lane}`));
  assert.deepEqual(kinds, ['asking:d', 'budget:c', 'error:b', 'stale_claim:a']);
  const needsTop = (await page.locator('#needs-section').boundingBox()).y;
  assert.ok(needsTop < (await page.locator('#lanes-section').boundingBox()).y, 'the queue is above the lanes');
  assert.match(await page.textContent('#needs li[data-kind="asking"]'), /Should I keep <b>the alias<\/b>\?/);
  assert.equal(await page.locator('#needs b, #needs img, #needs script').count(), 0, 'agent text stays text');
  assert.match(await page.textContent('#needs li[data-kind="budget"]'), /1200 of 1000 tokens/);
  assert.match(await page.textContent('#needs li[data-kind="error"]'), /claude: command not found/);
  assert.match(await page.textContent('#needs li[data-kind="stale_claim"] .need-cli'), /spice task takeover .* --stale \d+/);

  step('a reply typed into the asking entry reaches the lane as steering');
  await page.fill('#needs li[data-kind="asking"] textarea', 'Keep it <i>for now</i>');
  await page.click('#needs li[data-kind="asking"] button[type="submit"]');
  await page.waitForFunction(() => /^sent /.test(document.querySelector('#needs li[data-kind="asking"] [role="status"]').textContent), null, { timeout: 5000 });
  const replies = JSON.parse(spice('inbox', 'lane:d', '--json'));
  assert.ok(replies.some((i) => i.text === 'Keep it <i>for now</i>'), 'the reply is an item for lane d');

  const title = await page.title();
  await page.evaluate(() => { window.__sameDocument = true; });

  step('a steer from the CLI appears without a reload');
  const pendingBefore = Number(await page.textContent('#lanes tr[data-lane="a"] td.pending, #lanes tr[data-lane="a"] td:nth-child(9)'));
  const t0 = Date.now();
  spice('steer', 'lane:a', 'from the command line');
  await page.waitForFunction((n) => {
    const td = document.querySelector('#lanes tr[data-lane="a"] td:nth-child(9)');
    return td && Number(td.textContent) === n;
  }, pendingBefore + 1, { timeout: 5000 });
  console.log(`  appeared after ${Date.now() - t0} ms`);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');

  step('hostile transcript content renders inert');
  await page.click('#lanes tr[data-lane="a"]');
  await page.waitForSelector('#transcript li.ev.assistant');
  const transcript = await page.textContent('#transcript');
  assert.ok(transcript.includes('<script>window.__pwned = 1</script>'), 'script tag shown as text');
  assert.ok(transcript.includes('<img src=x onerror="window.__pwned = 2">'), 'img tag shown as text');
  assert.equal(await page.locator('#transcript script, #transcript img, #transcript a, #inbox img').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.title(), title);
  assert.ok(!transcript.includes('\u001b'), 'escape sequences neutralised');
  assert.ok(!transcript.includes('\u202e'), 'bidi controls neutralised');
  assert.ok(await page.locator('#transcript li.ev.failed').count() >= 1, 'failed command marked');

  step('the transcript updates live');
  appendFileSync(env.TRANSCRIPT, claudeLine(900, 'appended live <b>not bold</b>'));
  await page.waitForFunction(() => document.querySelector('#transcript').textContent.includes('appended live <b>not bold</b>'), null, { timeout: 5000 });
  assert.equal(await page.locator('#transcript b').count(), 0);

  step('the steer form creates an item');
  await page.fill('#steer-text', 'sent from the page <i>x</i>');
  await page.click('#steer-send');
  await page.waitForFunction(() => /^sent /.test(document.querySelector('#steer-msg').textContent), null, { timeout: 5000 });
  const items = JSON.parse(spice('inbox', 'lane:a', '--json'));
  const mine = items.find((i) => i.text === 'sent from the page <i>x</i>');
  assert.ok(mine, 'the item is in the store');
  await page.waitForSelector(`#inbox li[data-key="${mine.key}"]`, { timeout: 5000 });
  assert.equal(await page.locator('#inbox i').count(), 0);

  step('Take over takes a stale claim');
  await page.click(`#claims tr[data-task="${env.STALE_ID}"] button.takeover`);
  await page.waitForFunction(() => /took over|refused/.test(document.querySelector('#takeover-msg').textContent), null, { timeout: 5000 });
  assert.match(await page.textContent('#takeover-msg'), /took over .* now held by operator/);
  const claims = JSON.parse(spice('task', 'claims', '--json'));
  assert.equal(claims.find((c) => c.id === env.STALE_ID).claimant, 'operator');

  step('... leaves the needs-you queue, and a live claim offers no takeover');
  await page.waitForFunction(() => !document.querySelector('#needs li[data-kind="stale_claim"]'), null, { timeout: 5000 });
  assert.equal(await page.locator(`#claims tr[data-task="${env.FRESH_ID}"] button.takeover`).count(), 0);
  assert.match(await page.textContent(`#claims tr[data-task="${env.FRESH_ID}"]`), /live/);

  step('a live claim is taken only behind "force" and a confirmation');
  const holder = () => JSON.parse(spice('task', 'claims', '--json')).find((c) => c.id === env.FRESH_ID).claimant;
  answers.push(false);
  await page.click(`#claims tr[data-task="${env.FRESH_ID}"] button.force-takeover`);
  assert.equal(answers.length, 0, 'the page asked first');
  assert.equal(holder(), 'busy', 'a declined confirmation takes nothing');
  answers.push(true);
  await page.click(`#claims tr[data-task="${env.FRESH_ID}"] button.force-takeover`);
  await page.waitForFunction(() => /\(forced\)/.test(document.querySelector('#takeover-msg').textContent), null, { timeout: 5000 });
  assert.equal(holder(), 'operator');
  const forced = JSON.parse(spice('task', 'ledger', env.FRESH_ID, '--json')).find((e) => e.kind === 'takeover');
  assert.equal(forced.detail.forced, true);
  await page.waitForFunction((id) => !document.querySelector(`#claims tr[data-task="${id}"] button.force-takeover`),
    env.FRESH_ID, { timeout: 5000 });

  step('a lane paused at its budget shows its tokens, and raise and stop go through the store');
  await page.waitForSelector('#lanes tr[data-lane="c"] .budget-raise');
  assert.match(await page.textContent('#lanes tr[data-lane="c"] .tokens'), /^1200 \/ 1000$/);
  assert.equal(await page.locator('#lanes tr[data-lane="c"] .lift').count(), 0, 'a budget pause is not lifted like a crash hold');
  assert.match(await page.textContent('#lanes tr[data-lane="a"] .tokens'), /^0$/);
  answers.push('5000');
  await page.click('#lanes tr[data-lane="c"] .budget-raise');
  await page.waitForFunction(() => document.querySelector('#lanes tr[data-lane="c"] .tokens').textContent === '1200 / 5000', null, { timeout: 5000 });
  answers.push(true);
  await page.click('#lanes tr[data-lane="c"] .budget-stop');
  for (let i = 0; i < 50 && !JSON.parse(spice('budget', 'show', '--json')).some((b) => b.name === 'c' && b.stop); i++) {
    await page.waitForTimeout(100);
  }
  assert.ok(JSON.parse(spice('budget', 'show', '--json')).some((b) => b.name === 'c' && b.stop && b.limit === 5000), 'the stop reached the store');

  step('the ledger of a task shows its history');
  await page.click(`#claims tr[data-task="${env.STALE_ID}"] a`);
  await page.waitForFunction(() => document.querySelector('#ledger tbody').textContent.includes('displaced'), null, { timeout: 5000 });

  step('the review of what lane r\'s agent changed, and a comment on its lines that becomes steering');
  await page.click('#lanes tr[data-lane="r"] button.review');
  await page.waitForSelector('#review-diff table.diff tr.kadd');
  // 1,000 added lines of a generated file: the blocks far below the viewport are empty
  // boxes until they scroll near.
  const big = '#review-diff .file[data-path="x_table.rs"]';
  const waiting = await page.locator(`${big} .block.waiting`).count();
  assert.ok(waiting >= 3, `only the blocks near the viewport are drawn (${waiting} of 7 waiting)`);
  assert.equal(await page.locator(`${big} td.pick[data-line="1000"]`).count(), 0);
  assert.match(await page.textContent('#review-task'), /Reviewed work/);
  assert.match(await page.textContent('#review-files'), /x\.rs modified \+2 -1/);
  assert.match(await page.textContent('#review-commits'), /b, and markup/);
  assert.match(await page.textContent('#review-base'), /1 file\(s\) edited, not committed/);
  // Below the long generated file: drawn once scrolled near.
  await page.locator('#review-diff .file.uncommitted[data-path="notes.txt"]').scrollIntoViewIfNeeded();
  await page.waitForSelector('#review-diff .file.uncommitted[data-path="notes.txt"] tr.kadd');
  assert.match(await page.textContent('#review-diff h3.uncommitted'), /Not committed yet \(1 file\(s\)\)/);
  assert.equal(await page.locator('#review-diff img').count(), 0, 'changed lines stay text');
  await page.click('#review-diff td.pick[data-line="2"]');
  await page.click('#review-diff td.pick[data-line="3"]', { modifiers: ['Shift'] });
  assert.equal(await page.locator('#review-diff tr.chosen').count(), 2);
  await page.fill('#review-diff tr.comment-form textarea', 'No todo!() here.');
  await page.click('#review-diff tr.comment-form button[type="submit"]');
  await page.waitForSelector('#review-diff tr.comment', { timeout: 5000 });
  const anchored = JSON.parse(spice('inbox', 'lane:r', '--json'));
  assert.equal(anchored.length, 1);
  assert.equal(anchored[0].text, 'Review of x.rs:2-3:\n```\nfn b() { todo!() }\nfn c() {}\n```\nNo todo!() here.');
  // Shown at the lines it is about: right after line 3, pending, then with the answer.
  const after3 = await page.$eval('#review-diff tr.comment', (tr) => tr.previousElementSibling.dataset.new);
  assert.equal(after3, '3');
  assert.match(await page.textContent('#review-diff tr.comment'), /pending.*x\.rs:2-3.*No todo!\(\) here\./);
  execFileSync(env.SPICE_BIN, ['ack', 'apply'], { cwd: env.REPO, env, input: `ACK ${anchored[0].key}: it returns an error now` });
  await page.waitForFunction(() => /acked/.test(document.querySelector('#review-diff tr.comment').textContent), null, { timeout: 8000 });
  assert.match(await page.textContent('#review-diff tr.comment .reply'), /ACK\s*it returns an error now/);

  step('the review side by side and unified, coloured, a long file drawn as it scrolls in');
  // Side by side at desktop widths: a removed line beside the line that replaced it.
  assert.equal(await page.getAttribute('#review-split', 'aria-pressed'), 'true');
  const x = '#review-diff .file[data-path="x.rs"]';
  assert.equal(await page.locator(`${x} table.diff.split`).count(), 1);
  assert.equal(await page.textContent(`${x} tr[data-new="2"] td.code.del`), 'fn b() {}');
  assert.equal(await page.textContent(`${x} tr[data-new="2"] td.code.add`), 'fn b() { todo!() }');
  // Coloured by highlight.js: spans of its classes around the text, markup kept text.
  assert.ok(await page.locator(`${x} span.hljs-keyword`).count() >= 4, 'rust keywords coloured');
  assert.equal(await page.locator('#review-diff img').count(), 0, 'markup in a coloured line stays text');
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  // The long file's last block, drawn once it scrolls near.
  await page.locator(`${big} .block`).last().scrollIntoViewIfNeeded();
  await page.waitForSelector(`${big} td.pick[data-line="1000"]`, { timeout: 5000 });
  // Unified on request, remembered by this browser; the comment stays at its lines.
  await page.click('#review-unified');
  await page.waitForSelector(`${x} table.diff.unified`);
  assert.equal(await page.locator('#review-diff table.diff.split').count(), 0);
  assert.equal(await page.textContent(`${x} tr.kdel td.code`), '-fn b() {}');
  assert.equal(await page.evaluate(() => localStorage.getItem('spice.review.view')), 'unified');
  assert.equal(await page.$eval('#review-diff tr.comment', (tr) => tr.previousElementSibling.dataset.new), '3');
  await page.click('#review-split');
  await page.waitForSelector(`${x} table.diff.split`);
  await page.locator(x).scrollIntoViewIfNeeded();
  if (env.SCREENSHOTS) await page.screenshot({ path: `${env.SCREENSHOTS}/console-review.png` });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.click('#review-unified');
  await page.locator(x).scrollIntoViewIfNeeded();
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, 'the review fits a phone');
  if (env.SCREENSHOTS) await page.screenshot({ path: `${env.SCREENSHOTS}/console-review-phone.png` });
  await page.click('#review-close');
  assert.equal(await page.isHidden('#review-section'), true);

  step('a lease that lapses while the page is open: its claim enters the queue, with nothing else changing');
  const lapsing = JSON.parse(spice('task', 'add', '--json', 'Lapsing work', '--project', 'app')).id;
  spice('task', 'claim', lapsing, '--claimant', 'sess-l', '--lease', '3s');
  await page.waitForSelector(`#claims tr[data-task="${lapsing}"]`, { timeout: 5000 });
  assert.equal(await page.locator(`#needs li[data-task="${lapsing}"]`).count(), 0, 'live: not in the queue');
  await page.waitForSelector(`#needs li[data-kind="stale_claim"][data-task="${lapsing}"]`, { timeout: 8000 });

  step('installable: the manifest and its icon are served from this origin');
  const manifest = await page.evaluate(async () => (await fetch('/manifest.webmanifest')).json());
  assert.equal(manifest.start_url, '/');
  assert.equal(await page.evaluate(async () => (await fetch(document.querySelector('link[rel=manifest]').href)).status), 200);

  step('desktop and phone widths: the queue first, no sideways scroll at 390 px');
  await page.setViewportSize({ width: 1280, height: 900 });
  if (env.SCREENSHOTS) await page.screenshot({ path: `${env.SCREENSHOTS}/console-desktop.png`, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.scrollWidth <= 390, null, { timeout: 5000 })
    .catch(async () => assert.fail(`the page scrolls sideways at 390 px: ${await page.evaluate(() => document.documentElement.scrollWidth)} px wide`));
  assert.ok((await page.locator('#needs-section').boundingBox()).y < 200, 'the queue is at the top on a phone');
  if (env.SCREENSHOTS) await page.screenshot({ path: `${env.SCREENSHOTS}/console-phone.png`, fullPage: true });

  assert.deepEqual(problems, []);
  console.log('browser checks passed');
} finally {
  await browser.close();
}
