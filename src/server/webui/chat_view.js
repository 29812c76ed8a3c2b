// How one message is drawn: markdown answer with code blocks, the reasoning in a collapsible box,
// tool calls as calls (name and arguments), a copy button, counters and the block view.
import { BlockView } from './blocks.js';

// Raw HTML in the model's output is shown as text (html: false), never interpreted.
const md = window.markdownit({ html: false, linkify: false, breaks: true });

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard permission (plain http on another host): select-and-copy through a textarea.
    const t = el('textarea');
    t.value = text;
    document.body.append(t);
    t.select();
    document.execCommand('copy');
    t.remove();
  }
  const old = button.textContent;
  button.textContent = 'Copied';
  setTimeout(() => { button.textContent = old; }, 1200);
}

function copyButton(getText, label = 'Copy') {
  const b = el('button', 'ghost small copy', label);
  b.type = 'button';
  b.addEventListener('click', () => copyText(getText(), b));
  return b;
}

export function renderMarkdown(target, text) {
  target.innerHTML = md.render(text);
  for (const pre of target.querySelectorAll('pre')) {
    const wrap = el('div', 'code-wrap');
    pre.replaceWith(wrap);
    wrap.append(pre, copyButton(() => pre.textContent));
  }
}

function prettyArguments(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 1).replace(/\n\s*/g, ' ');
  } catch {
    return args;  // still streaming, or not JSON: shown as the model wrote it
  }
}

const MODE_NAMES = { ar: 'AR', diffusion: 'diffusion', spec: 'guess-then-verify' };

export class MessageView {
  constructor(msg) {
    this.msg = msg;
    this.root = el('div', `msg ${msg.role}`);
    const avatar = el('div', 'avatar', msg.role === 'user' ? 'You' : 'C');
    this.body = el('div', 'body');
    this.root.append(avatar, this.body);
    if (msg.role === 'user') {
      this.body.append(el('div', 'user-text', msg.content));
      return;
    }
    this.reasoning = el('details', 'reasoning');
    this.reasoning.open = true;
    this.reasoningText = el('div', 'reasoning-text');
    this.reasoning.append(el('summary', null, 'Reasoning'), this.reasoningText);
    this.toolCalls = el('div', 'tool-calls');
    this.answer = el('div', 'answer markdown');
    this.error = el('div', 'error');
    const foot = el('div', 'msg-foot');
    this.stats = el('span', 'stats muted');
    foot.append(this.stats, copyButton(() => this.copyable()));
    this.blocks = new BlockView(msg.mode);
    this.body.append(this.reasoning, this.toolCalls, this.answer, this.error, this.blocks.root, foot);
    this.draw();
    if (msg.passes?.length) this.blocks.load(msg.passes, msg.stats?.tokensPerSecond);
    if (msg.state !== 'streaming') this.reasoning.open = false;
  }

  copyable() {
    const calls = (this.msg.tool_calls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`);
    return [this.msg.content, ...calls].filter(Boolean).join('\n');
  }

  // Redraws from this.msg (at most once per frame while streaming).
  draw() {
    const m = this.msg;
    this.root.dataset.state = m.state ?? 'done';
    this.reasoning.hidden = !m.reasoning;
    this.reasoningText.textContent = m.reasoning ?? '';
    this.toolCalls.hidden = !(m.tool_calls?.length);
    this.toolCalls.replaceChildren(...(m.tool_calls ?? []).map((c) => {
      const d = el('div', 'tool-call');
      d.append(el('span', 'tc-icon', 'ƒ'), el('span', 'tc-name', c.function.name), el('code', 'tc-args', prettyArguments(c.function.arguments)));
      return d;
    }));
    renderMarkdown(this.answer, m.content ?? '');
    this.answer.hidden = !m.content && !!m.tool_calls?.length;
    this.error.hidden = !m.error;
    this.error.textContent = m.error ?? '';
    this.blocks.root.hidden = !m.mode || m.mode === 'ar';
    const s = m.stats;
    const parts = [MODE_NAMES[m.mode] ?? ''];
    if (m.state === 'streaming') parts.push('writing…');
    if (m.state === 'stopped') parts.push('stopped');
    if (s?.tokens != null) parts.push(`${s.tokens} tokens`);
    if (s?.tokensPerSecond != null) parts.push(`${Math.round(s.tokensPerSecond)} tokens/s`);
    this.stats.textContent = parts.filter(Boolean).join(' · ');
  }

  scheduleDraw() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.draw();
    });
  }

  // Streaming input.
  delta(d) {
    const m = this.msg;
    if (d.reasoning_content) m.reasoning = (m.reasoning ?? '') + d.reasoning_content;
    if (d.content) m.content = (m.content ?? '') + d.content;
    for (const tc of d.tool_calls ?? []) {
      m.tool_calls ??= [];
      const c = m.tool_calls[tc.index] ??= { id: tc.id, type: 'function', function: { name: '', arguments: '' } };
      if (tc.id) c.id = tc.id;
      if (tc.function?.name) c.function.name = tc.function.name;
      if (tc.function?.arguments) c.function.arguments += tc.function.arguments;
    }
    if (d.content && m.reasoning) this.reasoning.open = false;  // the answer started: fold the reasoning
    this.scheduleDraw();
  }

  pass(ev) {
    (this.msg.passes ??= []).push(ev);
    this.blocks.push(ev);
  }

  done() {
    cancelAnimationFrame(this.pending);
    this.pending = 0;
    this.draw();
    this.blocks.finish(this.msg.stats?.tokensPerSecond);
  }
}
