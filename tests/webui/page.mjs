// Driving the web page in headless Chromium: the browser is Debian's (/usr/bin/chromium),
// playwright-core only drives it (it downloads nothing).
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

export function launch() {
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

// A fresh page (its own local storage) at `url`. Every request it makes is recorded: the page
// must not fetch anything from anywhere but the server.
export async function openPage(browser, url, { width = 1400, height = 900 } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  page.requests = [];
  page.errors = [];
  page.on('request', (r) => page.requests.push(r.url()));
  page.on('pageerror', (e) => page.errors.push(String(e)));
  await page.goto(url);
  return page;
}

export async function setMode(page, mode) {
  await page.click(`#mode input[value=${mode}] + span`);
}

export async function setThinking(page, on) {
  if ((await page.isChecked('#thinking')) !== on) await page.click('label.switch');
}

export async function setTools(page, on) {
  if (await page.isHidden('#settings')) await page.click('#settings-toggle');
  if ((await page.isChecked('#use-tools')) !== on) await page.click('#use-tools');
}

// Counts, while the answer streams, what the block view showed: rows drawn and masked cells seen.
export async function watchBlocks(page) {
  await page.evaluate(() => {
    window.__seen = { rowsWhileStreaming: 0, masksWhileStreaming: 0, passValues: new Set() };
    new MutationObserver(() => {
      const msg = [...document.querySelectorAll('.msg.assistant')].at(-1);
      if (!msg || msg.dataset.state !== 'streaming') return;
      const rows = msg.querySelectorAll('.block-row');
      window.__seen.rowsWhileStreaming = Math.max(window.__seen.rowsWhileStreaming, rows.length);
      window.__seen.masksWhileStreaming = Math.max(window.__seen.masksWhileStreaming, msg.querySelectorAll('.cell.mask').length);
      for (const r of rows) window.__seen.passValues.add(r.dataset.passes);
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, attributes: true });
  });
}

export async function seenBlocks(page) {
  return page.evaluate(() => ({ ...window.__seen, passValues: [...window.__seen.passValues] }));
}

// Types a message, sends it, waits until the answer is complete; returns its locator.
export async function ask(page, text, timeout = 60_000) {
  const before = await page.locator('.msg.assistant').count();
  await page.fill('#prompt', text);
  await page.click('#send');
  const msg = page.locator('.msg.assistant').nth(before);
  await msg.waitFor();
  await page.waitForFunction((i) => {
    const m = document.querySelectorAll('.msg.assistant')[i];
    return m && m.dataset.state !== 'streaming';
  }, before, { timeout });
  return msg;
}
