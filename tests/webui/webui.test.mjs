// The web page end to end: a real headless Chromium against `clover serve` with the default model
// (clover-tiny). The page must answer, show reasoning apart from the answer, draw the blocks as
// they fill in, honour the thinking switch, show tool calls, and refuse to work until it has the
// key of a server started with --api-key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './clover_server.mjs';
import { ask, launch, openPage, seenBlocks, setMode, setThinking, setTools, watchBlocks } from './page.mjs';

const QUESTION = 'What is the capital of Australia? One word.';
let browser, server, keyed;

before(async () => {
  [browser, server, keyed] = await Promise.all([launch(), startServer(), startServer(['--api-key', 'webui-test-key'])]);
});

after(async () => {
  await browser?.close();
  await Promise.all([server?.stop(), keyed?.stop()]);
});

// A fresh browser context (empty local storage) on the page, ready, with these settings.
async function freshPage(url, { mode = 'diffusion', thinking = true, tools = false } = {}) {
  const page = await openPage(browser, url);
  await page.waitForSelector('body[data-ready=true]');
  await setMode(page, mode);
  await setThinking(page, thinking);
  if (tools) await setTools(page, true);
  return page;
}

function onlyLocal(page, url) {
  const foreign = page.requests.filter((r) => !r.startsWith(url));
  assert.deepEqual(foreign, [], 'the page fetched something from elsewhere');
  assert.deepEqual(page.errors, [], 'script errors on the page');
}

test('diffusion, thinking on: Canberra in the answer, reasoning in its box, blocks filled in pass by pass', async () => {
  const page = await freshPage(server.url);
  await watchBlocks(page);
  const msg = await ask(page, QUESTION);
  assert.match(await msg.locator('.answer').innerText(), /Canberra/);
  assert.doesNotMatch(await msg.locator('.answer').innerText(), /<\/?think>/);
  // The reasoning is in its own box, not in the answer.
  const reasoning = msg.locator('details.reasoning');
  assert.ok(await reasoning.isVisible(), 'a reasoning box');
  assert.ok((await reasoning.locator('.reasoning-text').textContent()).trim().length > 0, 'with the reasoning in it');
  // At least one block row whose cells were committed over one or more passes.
  const rows = msg.locator('.block-row');
  assert.ok(await rows.count() >= 1, 'a block row');
  const passes = await rows.evaluateAll((rs) => rs.map((r) => Number(r.dataset.passes)));
  assert.ok(passes.some((p) => p > 0), `passes per row: ${passes}`);
  const committed = await msg.locator('.block-row .cell[data-pass]').evaluateAll((cs) => cs.map((c) => Number(c.dataset.pass)));
  assert.ok(committed.some((p) => p >= 1), 'cells committed by a denoising pass');
  assert.equal(await msg.locator('.block-row').first().locator('.cell').count(), 32, 'a row is the 32 positions of a block');
  // Drawn while the answer streamed, not only at the end.
  const seen = await seenBlocks(page);
  assert.ok(seen.rowsWhileStreaming >= 1, `block rows drawn while streaming: ${JSON.stringify(seen)}`);
  // The counters and the replay of the finished answer.
  assert.match(await msg.locator('.bv-counters').innerText(), /\d+ blocks? · \d+ pass(es)? · [\d.]+ tokens\/pass · \d+ tokens\/s/);
  await msg.locator('.bv-replay').click();
  await page.waitForFunction(() => /event 0\//.test(document.querySelector('.msg.assistant .bv-step').textContent) ||
    /event [1-9]/.test(document.querySelector('.msg.assistant .bv-step').textContent));
  const total = Number(await msg.locator('.bv-scrub').getAttribute('max'));
  await page.waitForFunction((n) => document.querySelector('.msg.assistant .bv-step').textContent === `event ${n}/${n}`, total);
  onlyLocal(page, server.url);
  await page.context().close();
});

test('thinking off: no reasoning box and no </think> in the answer', async () => {
  const page = await freshPage(server.url, { thinking: false });
  const msg = await ask(page, QUESTION);
  const answer = await msg.locator('.answer').innerText();
  assert.ok(await msg.locator('details.reasoning').isHidden(), 'no reasoning box');
  assert.doesNotMatch(answer, /<\/think>/);
  assert.match(answer, /Canberra/);
  onlyLocal(page, server.url);
  await page.context().close();
});

test('tools: "Is it warmer in Lisbon or in Oslo?" with get_weather shows two tool calls', async () => {
  const page = await freshPage(server.url, { tools: true });
  const msg = await ask(page, 'Is it warmer in Lisbon or in Oslo?');
  const calls = msg.locator('.tool-call');
  assert.equal(await calls.count(), 2);
  assert.deepEqual(await calls.locator('.tc-name').allInnerTexts(), ['get_weather', 'get_weather']);
  const args = (await calls.locator('.tc-args').allInnerTexts()).map((a) => JSON.parse(a));
  assert.deepEqual(args, [{ city: 'Lisbon' }, { city: 'Oslo' }]);
  onlyLocal(page, server.url);
  await page.context().close();
});

test('guess-then-verify: each drafted block with the run the verifier kept marked', async () => {
  const page = await freshPage(server.url, { mode: 'spec' });
  const msg = await ask(page, 'Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4. Reply with the JSON list of orders.');
  assert.match(await msg.locator('.answer').innerText(), /"drone": "D-07"/);
  const rows = msg.locator('.block-row[data-kind=draft]');
  const n = await rows.count();
  assert.ok(n >= 1, 'drafted blocks');
  for (let i = 0; i < n; ++i) {
    const note = await rows.nth(i).locator('.bv-note').innerText();
    const kept = Number(note.match(/^kept (\d+)\/31$/)?.[1]);
    assert.ok(Number.isInteger(kept), note);
    // The kept run is marked, from position 1; a rejected rest only if the answer went on.
    assert.equal(await rows.nth(i).locator('.cell.accepted').count(), Math.min(kept, await rows.nth(i).locator('.cell.accepted, .cell.rejected').count()));
    if (kept > 0) assert.equal(await rows.nth(i).locator('.cell[data-pos="1"]').getAttribute('class'), 'cell accepted');
  }
  onlyLocal(page, server.url);
  await page.context().close();
});

test('conversations stay in the browser: a reload shows the answer and its blocks again', async () => {
  const page = await freshPage(server.url);
  await ask(page, QUESTION);
  await page.reload();
  await page.waitForSelector('body[data-ready=true]');
  assert.equal(await page.locator('#conversations li').count(), 1);
  assert.match(await page.locator('#conversations li').innerText(), /capital of Australia/);
  const msg = page.locator('.msg.assistant').first();
  assert.match(await msg.locator('.answer').innerText(), /Canberra/);
  assert.ok(await msg.locator('.block-row').count() >= 1, 'the recorded passes came back');
  await page.context().close();
});

test('--api-key: the page refuses until it has the key, then keeps it', async () => {
  const page = await openPage(browser, keyed.url);
  const dialog = page.locator('#key-dialog');
  await dialog.waitFor();
  assert.ok(await page.isDisabled('#send'), 'no sending without the key');
  assert.ok(await page.isDisabled('#prompt'));
  await page.keyboard.press('Escape');
  assert.ok(await dialog.isVisible(), 'the dialog cannot be dismissed');
  await page.fill('#key-input', 'wrong-key');
  await page.click('#key-submit');
  await page.waitForSelector('#key-error:not([hidden])');
  assert.match(await page.locator('#key-error').innerText(), /refused/);
  assert.ok(await dialog.isVisible());
  assert.ok(await page.isDisabled('#send'));
  await page.fill('#key-input', 'webui-test-key');
  await page.click('#key-submit');
  await page.waitForSelector('body[data-ready=true]');
  assert.ok(await dialog.isHidden());
  const msg = await ask(page, QUESTION);
  assert.match(await msg.locator('.answer').innerText(), /Canberra/);
  // Kept in the browser: a reload needs no key.
  await page.reload();
  await page.waitForSelector('body[data-ready=true]');
  assert.ok(await dialog.isHidden());
  onlyLocal(page, keyed.url);
  await page.context().close();
});

test('the page is compiled in: assets with their types, nothing at / with --no-webui', async () => {
  const root = await fetch(`${server.url}/`);
  assert.equal(root.status, 200);
  assert.match(root.headers.get('content-type'), /text\/html/);
  assert.match(await root.text(), /<title>clover<\/title>/);
  for (const [asset, type] of [['app.js', /javascript/], ['style.css', /text\/css/], ['markdown-it.min.js', /javascript/]]) {
    const r = await fetch(`${server.url}/webui/${asset}`);
    assert.equal(r.status, 200, asset);
    assert.match(r.headers.get('content-type'), type, asset);
  }
  assert.equal((await fetch(`${server.url}/webui/missing.js`)).status, 404);
  const off = await startServer(['--no-webui']);
  try {
    const r = await fetch(`${off.url}/`);
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.type, 'not_found_error');
    assert.equal((await fetch(`${off.url}/health`)).status, 200, 'the API is still there');
  } finally {
    await off.stop();
  }
});
