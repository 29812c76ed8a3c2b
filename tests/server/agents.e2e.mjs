// Real coding agents, unmodified (npm @openai/codex and @qwen-code/qwen-code, pinned by
// package-lock.json), complete a one-prompt non-interactive turn against a `clover serve` of this
// test's own with the default model: Codex CLI (`codex exec`, a custom provider with
// wire_api = "responses") and Qwen Code (`qwen -p`, the chat completions API). Each agent sends
// its whole system prompt and tool set (13,000 to 33,000 tokens), hence the server's large context
// and one slot. The test is that the client finishes without a protocol error and prints the
// model's text, not that the text is good (the model is tiny).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnServer } from './helpers.mjs';

const BIN = path.join(process.env.NODE_PATH ?? 'node_modules', '.bin');
const PROMPT = 'What is the capital of Australia? One word.';
let server;
let home;

before(async () => {
  server = await spawnServer(['--alias', 'clover-tiny', '-c', '65536', '--parallel', '1', '-t', '2']);
  home = mkdtempSync(path.join(tmpdir(), 'clover-agents-'));
});
after(() => {
  server?.proc.kill('SIGTERM');
  if (home) rmSync(home, { recursive: true, force: true });
});

// Runs a command to its end; returns {code, out} (stdout and stderr together).
function run(cmd, args, env, timeoutMs = 240_000) {
  return new Promise((resolve, reject) => {
    if (!existsSync(cmd)) return reject(new Error(`${cmd} is missing: install the npm test tooling (npm ci)`));
    const p = spawn(cmd, args, { env: { ...process.env, ...env }, cwd: home, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }); });
  });
}

test('Codex CLI: codex exec through the Responses API completes the turn', { timeout: 300_000 }, async () => {
  const codexHome = path.join(home, 'codex');
  await run('/bin/mkdir', ['-p', codexHome], {});
  writeFileSync(path.join(codexHome, 'config.toml'), [
    'model = "clover-tiny"',
    'model_provider = "clover"',
    '[model_providers.clover]',
    'name = "clover"',
    `base_url = "${server.base}/v1"`,
    'wire_api = "responses"',
  ].join('\n'));
  const { code, out } = await run(path.join(BIN, 'codex'), ['exec', '--skip-git-repo-check', PROMPT], { CODEX_HOME: codexHome });
  assert.equal(code, 0, out);
  assert.doesNotMatch(out, /^ERROR/m, out);
  // The model's answer comes after the "codex" header of the transcript.
  const answer = out.split(/^codex$/m)[1];
  assert.ok(answer && answer.trim().length > 0, out);
  assert.match(server.log(), /POST \/v1\/responses -> 200/);
});

test('Qwen Code: qwen -p through the chat completions API completes the turn', { timeout: 300_000 }, async () => {
  const { code, out } = await run(path.join(BIN, 'qwen'), ['--auth-type', 'openai', '-p', PROMPT], {
    HOME: home, OPENAI_BASE_URL: `${server.base}/v1`, OPENAI_API_KEY: 'none', OPENAI_MODEL: 'clover-tiny',
  });
  assert.equal(code, 0, out);
  assert.doesNotMatch(out, /API Error/, out);
  assert.ok(out.trim().length > 0, 'the model\'s text is printed');
  assert.match(server.log(), /POST \/v1\/chat\/completions -> 200/);
});
