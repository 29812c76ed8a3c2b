// The page's client of the server's OpenAI API: the model entry, and streaming chat completions
// with the pass events (docs/server.md, "Pass events").

export class AuthError extends Error {}

function headers(key) {
  const h = { 'Content-Type': 'application/json' };
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function errorOf(res) {
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body?.error?.message) message = body.error.message;
  } catch { /* not JSON */ }
  return res.status === 401 ? new AuthError(message) : new Error(message);
}

// GET /v1/models -> the served model's entry; AuthError when the key is missing or wrong.
export async function fetchModel(key) {
  const res = await fetch('/v1/models', { headers: headers(key) });
  if (!res.ok) throw await errorOf(res);
  const body = await res.json();
  return body.data[0];
}

// The request body for a conversation and the page's settings.
export function chatBody(messages, s) {
  const body = {
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: s.temperature,
    max_tokens: s.maxTokens,
    chat_template_kwargs: { enable_thinking: s.thinking },
    clover: { mode: s.mode, pass_events: s.mode !== 'ar' },
  };
  if (s.mode === 'diffusion') body.clover.threshold = s.threshold;
  if (s.tools) body.tools = s.tools;
  return body;
}

// Streams one chat completion. Calls on.delta(delta) for each choice delta, on.pass(event) for each
// pass event, on.done({finish_reason, timings, usage}) at the end. Resolves when the stream ends;
// rejects on an HTTP or in-band error (AbortError when `signal` aborted it).
export async function streamChat(body, key, signal, on) {
  const res = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(key), body: JSON.stringify(body), signal });
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const end = { finish_reason: null, timings: null, usage: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (!block.startsWith('data: ')) continue;
      const data = block.slice(6);
      if (data === '[DONE]') {
        on.done(end);
        return;
      }
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message ?? 'the generation failed');
      if (chunk.pass_event) on.pass(chunk.pass_event);
      const choice = chunk.choices?.[0];
      if (choice?.delta && Object.keys(choice.delta).length) on.delta(choice.delta);
      if (choice?.finish_reason) end.finish_reason = choice.finish_reason;
      if (chunk.timings) end.timings = chunk.timings;
      if (chunk.usage) end.usage = chunk.usage;
    }
  }
  throw new Error('the stream ended before the answer was complete');
}
