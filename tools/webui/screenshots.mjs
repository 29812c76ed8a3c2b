// Screenshots of the web page for the docs: the middle of a diffusion answer, its end, a strip of
// one block pass by pass, and a guess-then-verify answer.
//   CLOVER_BIN=build/bin/clover node tools/webui/screenshots.mjs [docs]
// The tiny model answers in a fraction of a second, so the browser's network is throttled
// (Chrome DevTools Protocol) while the answer streams: the page is caught live, mid-answer, with
// blocks still filling in, exactly as it draws them.
import path from 'node:path';
import { startServer } from '../../tests/webui/clover_server.mjs';
import { ask, launch, openPage, setMode, setThinking } from '../../tests/webui/page.mjs';

const outDir = process.argv[2] ?? 'docs';
const DRONES = 'Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4; '
  + 'D-21 searches the old quarry for a lost hiker. Reply with the JSON list of orders.';
// One block that takes several passes: the numbers fill in out of order.
const PROMPT = 'Sort this list: [41, 7, 23, 15, 38, 2]';

const server = await startServer();
const browser = await launch();
try {
  const page = await openPage(browser, server.url, { width: 1360, height: 860 });
  await page.waitForSelector('body[data-ready=true]');
  await setMode(page, 'diffusion');
  await setThinking(page, true);
  // Two exchanges first, so the page shows a conversation (the drone answer takes three blocks).
  await ask(page, 'What is the capital of Australia? One word.');
  await ask(page, DRONES);

  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: 6000, uploadThroughput: -1 });
  await page.fill('#prompt', PROMPT);
  await page.click('#send');
  // Mid-answer: a few passes done, masked cells left.
  await page.waitForFunction(() => {
    const m = [...document.querySelectorAll('.msg.assistant')].at(-1);
    const row = m?.querySelector('.block-row');
    return m?.dataset.state === 'streaming' && row && Number(row.dataset.passes) >= 4 && row.querySelector('.cell.mask');
  }, null, { timeout: 120_000, polling: 10 });
  await page.evaluate(() => { const m = document.getElementById('messages'); m.scrollTop = m.scrollHeight; });
  await page.screenshot({ path: path.join(outDir, 'webui-middle.png') });
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].at(-1).dataset.state === 'done', null, { timeout: 120_000 });
  await page.evaluate(() => { const m = document.getElementById('messages'); m.scrollTop = m.scrollHeight; });
  await page.screenshot({ path: path.join(outDir, 'webui-end.png') });

  // A strip of frames: the sort's block after each of its passes, from the recorded events.
  const sort = page.locator('.msg.assistant').last();
  const total = Number(await sort.locator('.bv-scrub').getAttribute('max'));
  const frames = [];
  for (let k = 1; k <= total; ++k) {
    await sort.locator('.bv-scrub').evaluate((el, v) => { el.value = String(v); el.dispatchEvent(new Event('input')); }, k);
    frames.push((await sort.locator('.bv-rows').screenshot()).toString('base64'));
  }
  const strip = await browser.newPage({ viewport: { width: 1000, height: 100 } });
  await strip.setContent(`<body style="margin:0;padding:6px 0;background:#fff;font:12px monospace;color:#64748b">${frames.map((f, i) =>
    `<div style="display:flex;align-items:center;gap:8px;padding:1px 8px"><span style="width:64px;white-space:nowrap">pass ${i + 1}</span>`
    + `<img src="data:image/png;base64,${f}"></div>`).join('')}</body>`);
  await strip.screenshot({ path: path.join(outDir, 'webui-strip.png'), fullPage: true });
  await strip.close();

  await page.click('#new-chat');
  await setMode(page, 'spec');
  const spec = await ask(page, DRONES);
  await spec.screenshot({ path: path.join(outDir, 'webui-spec.png') });
  console.log(`wrote webui-middle.png, webui-end.png, webui-strip.png and webui-spec.png in ${outDir}`);
} finally {
  await browser.close();
  await server.stop();
}
