// Screenshots of the web page for the docs: the middle of a diffusion answer and its end.
//   CLOVER_BIN=build/bin/clover node tools/webui/screenshots.mjs [docs]
// The tiny model answers in a fraction of a second, so the browser's network is throttled
// (Chrome DevTools Protocol) while the answer streams: the page is caught live, mid-answer, with
// blocks still filling in, exactly as it draws them.
import path from 'node:path';
import { startServer } from '../../tests/webui/clover_server.mjs';
import { ask, launch, openPage, setMode, setThinking } from '../../tests/webui/page.mjs';

const outDir = process.argv[2] ?? 'docs';
const PROMPT = 'Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4; '
  + 'D-21 searches the old quarry for a lost hiker. Reply with the JSON list of orders.';

const server = await startServer();
const browser = await launch();
try {
  const page = await openPage(browser, server.url, { width: 1360, height: 860 });
  await page.waitForSelector('body[data-ready=true]');
  await setMode(page, 'diffusion');
  await setThinking(page, true);
  // A first, short exchange, so the page shows a conversation.
  await ask(page, 'What is the capital of Australia? One word.');

  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: 6000, uploadThroughput: -1 });
  await page.fill('#prompt', PROMPT);
  await page.click('#send');
  // Mid-answer: the second block has started and still has masked cells.
  await page.waitForFunction(() => {
    const m = [...document.querySelectorAll('.msg.assistant')].at(-1);
    const rows = m?.querySelectorAll('.block-row') ?? [];
    return m?.dataset.state === 'streaming' && rows.length >= 2 && rows[rows.length - 1].querySelector('.cell.mask');
  }, null, { timeout: 120_000, polling: 20 });
  await page.screenshot({ path: path.join(outDir, 'webui-middle.png') });
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].at(-1).dataset.state === 'done', null, { timeout: 120_000 });
  await page.evaluate(() => { const m = document.getElementById('messages'); m.scrollTop = m.scrollHeight; });
  await page.screenshot({ path: path.join(outDir, 'webui-end.png') });
  console.log(`wrote ${outDir}/webui-middle.png and ${outDir}/webui-end.png`);
} finally {
  await browser.close();
  await server.stop();
}
