// Shared helpers for the server tests: the OpenAI client, raw HTTP/SSE access, metrics.
import { spawn } from 'node:child_process';
import OpenAI from 'openai';

export const URL_BASE = process.env.CLOVER_URL ?? 'http://127.0.0.1:8080';
export const API_KEY = process.env.CLOVER_API_KEY ?? '';
export const MODEL = process.env.CLOVER_MODEL_NAME ?? 'default';

export function client(opts = {}) {
  return new OpenAI({ baseURL: `${URL_BASE}/v1`, apiKey: API_KEY || 'none', maxRetries: 0, timeout: 120_000, ...opts });
}

// POST JSON (or a raw string body); returns {status, json, text}.
export async function post(path, body, { key = API_KEY, headers = {} } = {}) {
  const res = await fetch(`${URL_BASE}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text, headers: res.headers };
}

export async function get(path, { key = API_KEY } = {}) {
  const res = await fetch(`${URL_BASE}${path}`, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

// A streaming POST read to the end: the raw SSE `data:` payloads in order (strings), so the
// framing itself can be checked (the SDK hides [DONE]).
export async function sseEvents(path, body) {
  const res = await fetch(`${URL_BASE}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  const events = text.split('\n\n').filter((b) => b.length > 0).map((b) => {
    if (!b.startsWith('data: ')) throw new Error(`bad SSE block: ${JSON.stringify(b)}`);
    return b.slice(6);
  });
  return { status: res.status, contentType: res.headers.get('content-type'), events };
}

export async function metrics() {
  const { text } = await get('/metrics');
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^(\S+)\s+(\S+)$/);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(pred, timeoutMs = 10_000, stepMs = 50) {
  const t0 = Date.now();
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) return v;
    await sleep(stepMs);
  }
}

export const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the weather for a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' }, days: { type: 'integer' } },
        required: ['city'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'Get the local time of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

// Starts a server of the test's own (`clover serve` with the test model and `args`; `env` adds
// environment variables, `model: false` leaves -m out) and waits for /health; returns
// {base, port, proc}. Stop it with proc.kill('SIGTERM').
export async function spawnServer(args, { env = {}, model = true } = {}) {
  const proc = spawn(process.env.CLOVER_BIN,
    ['serve', ...(model ? ['-m', process.env.CLOVER_MODEL_PATH] : []), '--port', '0', ...args],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let buf = '';
  const port = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      buf += d;
      const m = buf.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) resolve(m[1]);
    });
    proc.on('exit', () => reject(new Error(`server exited: ${buf}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if ((await fetch(`${base}/health`)).status === 200) break;
    await sleep(50);
  }
  return { base, port: Number(port), proc, log: () => buf };
}
