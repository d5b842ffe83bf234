// The playground in a real browser: Debian's chromium driven by playwright-core.
// scripts/test-web builds the page, serves it on 127.0.0.1 and sets
// PLAYGROUND_URL (the page), CHROMIUM (the browser binary) and SCREENSHOTS
// (where the screenshots go).

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { after, before, beforeEach, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const url = process.env.PLAYGROUND_URL;
const shots = resolve(process.env.SCREENSHOTS ?? join(root, 'target'));
assert.ok(url, 'PLAYGROUND_URL names the served page (scripts/test-web sets it)');
assert.ok(process.env.CHROMIUM, 'CHROMIUM names the browser binary (scripts/test-web sets it)');

// The same build in Node, to compute what the page must draw.
const built = join(root, 'target', 'web');
const backstop = await import(pathToFileURL(join(built, 'backstop', 'index.mjs')));
const { computeSchedule } = await import(pathToFileURL(join(built, 'schedule.mjs')));

let browser;
let page;
let pageErrors;

before(async () => {
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM });
  mkdirSync(shots, { recursive: true });
});
after(async () => browser?.close());

beforeEach(async () => {
  page = await browser.newPage({ viewport: { width: 1320, height: 900 } });
  pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));
  await page.goto(url);
  await page.waitForSelector('body[data-ready=true]');
});

const text = (sel) => page.locator(sel).innerText();
const svgText = (sel) => page.locator(sel).textContent();
const marks = () => page.locator('#timeline svg .attempt-mark').count();

async function seedEvidence() {
  const file = await (await fetch(new URL('data/classify-seed.json', url))).json();
  return file.cases.find((c) => c.id === 'seed-incident-run').input;
}

test('classifies the seed 529 incident and marks its signal in the evidence', async () => {
  await page.selectOption('#example', 'amp-test-result-failed');
  assert.equal(await text('#class'), 'work');
  await page.selectOption('#example', 'seed-incident-run');
  assert.equal(await text('#class'), 'transient_transport');
  assert.equal(await text('#signal'), 'api error: 529');
  const mark = page.locator('#evidence-echo mark.signal');
  assert.equal(await mark.count(), 1);
  assert.equal((await mark.innerText()).toLowerCase(), 'api error: 529');
  assert.match(await text('#evidence-echo'), /API Error: 529 Overloaded/);
  assert.match(await text('#reasoning'), /transient_transport/);
  assert.match(await text('#steps'), /failed: step-12-run-precommit/);
  assert.deepEqual(pageErrors, []);
});

test('pasted text is classified as typed', async () => {
  await page.check('input[name=mode][value=text]');
  await page.fill('#evidence', 'Compiling app v0.1.0\nerror[E0425]: cannot find value `x` in this scope');
  assert.equal(await text('#class'), 'work');
  assert.equal(await page.locator('#evidence-echo mark.signal').innerText(), 'error[E');
  await page.fill('#evidence', 'fetch failed: ECONNRESET');
  assert.equal(await text('#class'), 'transient_transport');
  assert.deepEqual(pageErrors, []);
});

test('draws the default schedule: three attempts, stopped at the attempt cap', async () => {
  assert.equal(await marks(), 3);
  assert.equal(await page.locator('#timeline svg .jitter-band').count(), 2);
  const stop = await svgText('#timeline svg .stop-label');
  assert.match(stop, /^terminal_budget_exhausted: transient-retry attempt cap reached/);
  assert.match(await svgText('#timeline svg .budget-label'), /wait budget 5 min/);
  await page.screenshot({ path: join(shots, 'playground.png'), fullPage: true });
  assert.deepEqual(pageErrors, []);
});

test('ten attempts run into the wait budget, as next-action says in Node', async () => {
  await page.fill('#max-attempts', '10');
  const config = backstop.defaultConfig();
  config.transport.max_attempts = 10;
  const expected = computeSchedule(backstop.nextAction, { config, evidence: await seedEvidence(), entropy: 42n });
  assert.equal(expected.at(-1).decision.action, 'terminal_budget_exhausted');
  assert.ok(expected.length > 3 && expected.length < 10, `${expected.length} attempts`);
  assert.equal(await marks(), expected.length);
  assert.match(await svgText('#timeline svg .stop-label'), /terminal_budget_exhausted: transient-retry backoff-wait budget exhausted/);
  assert.match(await page.locator('#config').inputValue(), /"max_attempts": 10/);
});

test('a server hint over the ceiling hands the wait over to resume', async () => {
  await page.fill('#retry-after', '120');
  assert.equal(await marks(), 1);
  assert.match(await svgText('#timeline svg .stop-label'), /^resume: hands over to the run level in 2 min/);
});

test('an invalid config shows the component error naming the field', async () => {
  await page.fill('#max-attempts', '11');
  const error = page.locator('#config-error');
  assert.ok(await error.isVisible());
  assert.match(await error.innerText(), /Refused by the component: invalid_config/);
  assert.match(await error.innerText(), /config\.transport\.max_attempts: at most 10/);
  assert.equal(await page.getAttribute('#max-attempts', 'aria-invalid'), 'true');
  assert.equal(await marks(), 0);
  assert.match(await text('#breaker-steps'), /No story: the configuration is refused/);
  await page.locator('#schedule').screenshot({ path: join(shots, 'playground-error.png') });

  await page.click('#config-details summary');
  const config = JSON.parse(await page.locator('#config').inputValue());
  config.transport.max_attempts = 3;
  config.breakers[0].look_at = '';
  await page.fill('#config', JSON.stringify(config, null, 2));
  assert.match(await error.innerText(), /config\.breakers\[0\]\.look_at/);
  config.breakers[0].look_at = 'the build log';
  await page.fill('#config', JSON.stringify(config, null, 2));
  assert.ok(await error.isHidden());
  assert.equal(await marks(), 3);
  assert.deepEqual(pageErrors, []);
});

test('the breaker story trips at the threshold with its unblock text', async () => {
  assert.equal(await page.locator('#breaker-steps li').count(), 3);
  assert.match(await text('#breaker-meter'), /count 3 \/ threshold 3/);
  const trip = page.locator('#breaker-trip');
  assert.match(await trip.innerText(), /Blocked: the build breaker tripped \(3 identical failures, threshold 3\)/);
  assert.match(await trip.innerText(), /backstop-unblock <work-item>/);
  assert.match(await trip.innerText(), /==<n>==ERROR: AddressSanitizer: SEGV on unknown address <hex>/);

  await page.click('#breaker-back');
  assert.ok(await trip.isHidden());
  assert.match(await text('#breaker-meter'), /count 2 \/ threshold 3/);
  await page.fill('#threshold', '4');
  await page.click('#breaker-next');
  await page.click('#breaker-next');
  assert.equal(await page.locator('#breaker-steps li').count(), 4);
  assert.match(await trip.innerText(), /4 identical failures, threshold 4/);
  assert.deepEqual(pageErrors, []);
});
