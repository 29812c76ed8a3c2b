// Starts `clover serve` on a free port of 127.0.0.1 with the default model and waits until it is
// ready; used by the web page tests and tools/webui/screenshots.mjs.
import { spawn } from 'node:child_process';
import path from 'node:path';

export function cloverBin() {
  const bin = process.env.CLOVER_BIN;
  if (!bin) throw new Error('set CLOVER_BIN to the clover binary (CTest does)');
  return bin;
}

export function defaultModel() {
  return process.env.CLOVER_MODEL_PATH ?? path.join(path.dirname(cloverBin()), 'models', 'default.gguf');
}

// -> {url, stop(), log()}; rejects with the server's log when it does not come up in `timeoutMs`.
export async function startServer(args = [], timeoutMs = 60_000) {
  const proc = spawn(cloverBin(), ['serve', '-m', defaultModel(), '--host', '127.0.0.1', '--port', '0', '--parallel', '2',
    '-c', '4096', '-t', '1', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.setEncoding('utf8');
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`clover serve did not start:\n${log}`)), timeoutMs);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`clover serve exited (${code}):\n${log}`)); });
  });
  const url = `http://127.0.0.1:${port}`;
  const t0 = Date.now();
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() - t0 > timeoutMs) throw new Error(`clover serve did not become ready:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    log: () => log,
    stop: () => new Promise((resolve) => {
      if (proc.exitCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    }),
  };
}
