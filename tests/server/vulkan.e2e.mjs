// `clover serve --device vulkan` against `clover serve --device cpu` on the trained clover-tiny
// (run_vulkan_server_test.sh starts both): the device is named in /v1/models and /metrics, greedy
// answers are the same on both (plain, streaming, with tools, several requests batched into the
// slots at once), and block diffusion and guess-then-verify run on the GPU with the CPU's answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const VK = process.env.CLOVER_URL;
const CPU = process.env.CLOVER_CPU_URL;
const MODEL = process.env.CLOVER_MODEL_NAME ?? 'clover-test';
const vk = new OpenAI({ baseURL: `${VK}/v1`, apiKey: 'none', maxRetries: 0, timeout: 300_000 });
const cpu = new OpenAI({ baseURL: `${CPU}/v1`, apiKey: 'none', maxRetries: 0, timeout: 300_000 });

const TOOLS = [{
  type: 'function',
  function: {
    name: 'dispatch_drone', description: 'Send a drone to a depot with a payload',
    parameters: { type: 'object', properties: { drone: { type: 'string' }, depot: { type: 'string' }, payload: { type: 'string' } },
      required: ['drone', 'depot'] },
  },
}];

function request(content, extra = {}) {
  return { model: MODEL, messages: [{ role: 'user', content }], max_tokens: 40, temperature: 0,
    chat_template_kwargs: { enable_thinking: false }, ...extra };
}

test('the device is named in /v1/models and /metrics', async () => {
  const models = await (await fetch(`${VK}/v1/models`)).json();
  assert.match(models.data[0].meta.device, /^vulkan:\d+ /);
  const cpuModels = await (await fetch(`${CPU}/v1/models`)).json();
  assert.equal(cpuModels.data[0].meta.device, 'cpu');
  const metrics = await (await fetch(`${VK}/metrics`)).text();
  assert.match(metrics, /clover_device_info\{device="vulkan:\d+ [^"]*"\} 1/);
});

test('greedy answers are the same on the GPU and the CPU', async () => {
  for (const content of ['What is the capital of Australia? One word.', 'Count from one to five.']) {
    const [a, b] = await Promise.all([vk.chat.completions.create(request(content)), cpu.chat.completions.create(request(content))]);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content, content);
    assert.equal(a.usage.completion_tokens, b.usage.completion_tokens);
  }
});

test('tool calls come back the same', async () => {
  const r = request('Dispatch drone D-7 to the north depot with two medical kits.', { tools: TOOLS, max_tokens: 64 });
  const [a, b] = await Promise.all([vk.chat.completions.create(r), cpu.chat.completions.create(r)]);
  assert.deepEqual(a.choices[0].message.tool_calls?.map((t) => t.function), b.choices[0].message.tool_calls?.map((t) => t.function));
  assert.equal(a.choices[0].finish_reason, b.choices[0].finish_reason);
});

test('streaming on the GPU gives the non-streaming answer', async () => {
  const r = request('Name three colours.');
  const whole = await cpu.chat.completions.create(r);
  let text = '';
  for await (const chunk of await vk.chat.completions.create({ ...r, stream: true })) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, whole.choices[0].message.content);
});

test('four requests at once (batched into the slots) each give their answer alone', async () => {
  const prompts = ['Say hello.', 'What is two plus two?', 'Name a fruit.', 'What colour is the sky?'];
  const alone = [];
  for (const p of prompts) alone.push((await cpu.chat.completions.create(request(p, { max_tokens: 24 }))).choices[0].message.content);
  const together = await Promise.all(prompts.map((p) => vk.chat.completions.create(request(p, { max_tokens: 24 }))));
  together.forEach((r, i) => assert.equal(r.choices[0].message.content, alone[i], prompts[i]));
});

test('block diffusion and guess-then-verify on the GPU give the CPU answers; spec gives the AR answer', async () => {
  for (const content of ['What is the capital of Australia? One word.', 'Count from one to five.']) {
    const ar = (await vk.chat.completions.create(request(content))).choices[0].message.content;
    for (const mode of ['diffusion', 'spec']) {
      const r = request(content, { clover: { mode } });
      const [a, b] = await Promise.all([vk.chat.completions.create(r), cpu.chat.completions.create(r)]);
      assert.equal(a.choices[0].message.content, b.choices[0].message.content, `${mode}: ${content}`);
      // An answer of one token (the end token) is decided before any denoising pass.
      if (a.usage.completion_tokens > 1) assert.ok(a.timings?.denoise_passes > 0, `${mode}: denoising passes ran: ${content}`);
      if (mode === 'spec') assert.equal(a.choices[0].message.content, ar, `spec equals AR: ${content}`);
    }
  }
});

test('diffusion answers several requests at once on the GPU, each as alone', async () => {
  const prompts = ['Say hello.', 'What is two plus two?', 'Name a fruit.'];
  const r = (p) => request(p, { max_tokens: 24, clover: { mode: 'diffusion' } });
  const alone = [];
  for (const p of prompts) alone.push((await vk.chat.completions.create(r(p))).choices[0].message.content);
  const together = await Promise.all(prompts.map((p) => vk.chat.completions.create(r(p))));
  together.forEach((x, i) => assert.equal(x.choices[0].message.content, alone[i], prompts[i]));
});
