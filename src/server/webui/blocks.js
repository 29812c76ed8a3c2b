// The live block view ("the crossword"): each block of a diffusion answer is a row of cells that
// fill in pass by pass, each cell coloured by the pass that committed it and shaded by the
// confidence it had; masked positions look masked, positions after the end token are greyed. For
// guess-then-verify each row is one drafted block, its accepted run marked after verification.
// Built from the server's pass events (docs/server.md, "Pass events"), so a finished answer can be
// replayed or scrubbed pass by pass from what was recorded.

// One hue per pass, far apart for the first passes (most blocks finish in 1-4).
const HUES = [214, 150, 38, 340, 268, 190, 12, 96, 300, 60];

export function passHue(pass) {
  return HUES[(pass - 1) % HUES.length];
}

// Background and text colour of a committed cell: the pass's hue, deep when the model was sure
// of the token, pale when it was not (0.5 or below).
export function cellColors(pass, confidence) {
  if (pass === 0) return { bg: 'hsl(222 20% 34%)', fg: '#f8fafc' };  // chosen before the block
  const t = confidence == null ? 1 : Math.max(0, Math.min(1, (confidence - 0.5) / 0.5));
  const light = 86 - 38 * t;
  return { bg: `hsl(${passHue(pass)} ${50 + 35 * t}% ${light}%)`, fg: light < 62 ? '#ffffff' : '#1e293b' };
}

// What a cell shows of its token: whitespace made visible, cut to what fits.
export function cellText(text) {
  // Glyphs that the common system fonts (DejaVu, Noto, Segoe) all have.
  return text.replace(/\n/g, '↵').replace(/\t/g, '→').replace(/ /g, '·');
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

// The state of one block, rebuilt from its events.
function newBlock(size) {
  return { size, cells: Array.from({ length: size }, () => null), passes: 0, end: null, kind: 'denoise', accepted: -1 };
}

function applyEvent(blocks, ev) {
  const b = blocks[ev.block] ?? (blocks[ev.block] = newBlock(ev.size));
  if (ev.kind === 'verify') {
    b.accepted = ev.accepted;
    return;
  }
  b.kind = ev.kind;
  b.passes = ev.pass;
  b.end = ev.end;
  for (const c of ev.committed) {
    b.cells[c.pos] = { text: c.text, token: c.token, confidence: c.confidence, pass: c.pos === 0 && ev.pass === 1 ? 0 : ev.pass };
  }
}

// Tokens a block produced: up to and including its end token; for a verified draft, the pending
// token and the accepted run.
function blockTokens(b) {
  if (b.kind === 'draft') return b.accepted >= 0 ? b.accepted + 1 : 0;
  const upto = b.end == null ? b.size - 1 : b.end;
  let n = 0;
  for (let i = 0; i <= upto; ++i) if (b.cells[i]) ++n;
  return n;
}

export function summarize(events) {
  const blocks = [];
  for (const ev of events) applyEvent(blocks, ev);
  const list = blocks.filter(Boolean);
  const passes = list.reduce((s, b) => s + b.passes, 0);
  const tokens = list.reduce((s, b) => s + blockTokens(b), 0);
  return { blocks: list.length, passes, tokens, perPass: passes ? tokens / passes : 0 };
}

export class BlockView {
  // mode: "diffusion" or "spec" (the legend differs).
  constructor(mode) {
    this.mode = mode;
    this.events = [];
    this.blocks = [];
    this.shown = 0;        // events applied to the drawn state
    this.tokensPerSecond = null;
    this.root = el('div', 'blockview');
    const head = el('div', 'bv-head');
    head.append(el('span', 'bv-title', 'Blocks'));
    this.counters = el('span', 'bv-counters');
    head.append(this.counters);
    this.controls = el('span', 'bv-controls');
    this.replayButton = el('button', 'ghost small bv-replay', '▶ Replay');
    this.replayButton.type = 'button';
    this.replayButton.addEventListener('click', () => this.replay());
    this.scrub = el('input', 'bv-scrub');
    this.scrub.type = 'range';
    this.scrub.min = '0';
    this.scrub.setAttribute('aria-label', 'pass');
    this.scrub.addEventListener('input', () => this.showUpTo(Number(this.scrub.value)));
    this.step = el('span', 'bv-step');
    this.controls.append(this.replayButton, this.scrub, this.step);
    this.controls.hidden = true;
    head.append(this.controls);
    this.rows = el('div', 'bv-rows');
    this.root.append(head, this.rows, this.legend());
  }

  legend() {
    const lg = el('div', 'bv-legend');
    lg.append(el('span', 'muted', 'pass'));
    for (let p = 1; p <= 6; ++p) {
      const s = el('span', 'lg-cell', String(p));
      const c = cellColors(p, 1);
      s.style.background = c.bg;
      s.style.color = c.fg;
      lg.append(s);
    }
    const pale = el('span', 'lg-cell', '1');
    const pc = cellColors(1, 0.5);
    pale.style.background = pc.bg;
    pale.style.color = pc.fg;
    lg.append(el('span', 'muted', 'deep: sure, pale: unsure'), pale);
    lg.append(el('span', 'lg-cell mask'), el('span', 'muted', 'masked'));
    lg.append(el('span', 'lg-cell after-end'), el('span', 'muted', 'after the end'));
    lg.append(el('span', 'lg-cell end', 'end'), el('span', 'muted', 'end token'));
    if (this.mode === 'spec') {
      lg.append(el('span', 'lg-cell accepted-demo'), el('span', 'muted', 'draft kept by the verifier'));
      lg.append(el('span', 'lg-cell rejected-demo'), el('span', 'muted', 'draft rejected'));
    }
    return lg;
  }

  // Live: one more event from the stream.
  push(ev) {
    const live = this.shown === this.events.length;
    this.events.push(ev);
    if (!live) return;
    applyEvent(this.blocks, ev);
    this.shown = this.events.length;
    this.drawRow(ev.block);
    this.drawCounters();
  }

  // A recorded answer: every event at once, replay controls on.
  load(events, tokensPerSecond) {
    this.events = events.slice();
    this.tokensPerSecond = tokensPerSecond ?? null;
    this.finish();
  }

  finish(tokensPerSecond) {
    if (tokensPerSecond != null) this.tokensPerSecond = tokensPerSecond;
    this.controls.hidden = this.events.length === 0;
    this.scrub.max = String(this.events.length);
    this.showUpTo(this.events.length);
  }

  showUpTo(k) {
    this.blocks = [];
    for (const ev of this.events.slice(0, k)) applyEvent(this.blocks, ev);
    this.shown = k;
    this.rows.replaceChildren();
    this.blocks.forEach((_, i) => this.drawRow(i));
    this.scrub.value = String(k);
    this.step.textContent = `event ${k}/${this.events.length}`;
    this.drawCounters();
  }

  replay() {
    clearInterval(this.timer);
    const n = this.events.length;
    let k = 0;
    this.showUpTo(0);
    const ms = Math.max(60, Math.min(400, 8000 / Math.max(1, n)));
    this.timer = setInterval(() => {
      this.showUpTo(++k);
      if (k >= n) clearInterval(this.timer);
    }, ms);
  }

  drawCounters() {
    const s = summarize(this.events.slice(0, this.shown));
    const parts = [`${s.blocks} block${s.blocks === 1 ? '' : 's'}`, `${s.passes} pass${s.passes === 1 ? '' : 'es'}`,
      `${s.perPass.toFixed(1)} tokens/pass`];
    if (this.tokensPerSecond != null) parts.push(`${Math.round(this.tokensPerSecond)} tokens/s`);
    this.counters.textContent = parts.join(' · ');
  }

  drawRow(i) {
    const b = this.blocks[i];
    if (!b) return;
    let row = this.rows.querySelector(`.block-row[data-block="${i}"]`);
    if (!row) {
      row = el('div', 'block-row');
      row.dataset.block = String(i);
      // Rows arrive in block order; a replay redraws from an empty list.
      this.rows.append(row);
    }
    row.dataset.passes = String(b.passes);
    row.dataset.kind = b.kind;
    const cells = el('div', 'cells');
    cells.style.gridTemplateColumns = `repeat(${b.size}, minmax(0, 1fr))`;
    for (let p = 0; p < b.size; ++p) cells.append(this.cell(b, p));
    const label = el('span', 'bv-label', String(i + 1));
    const note = b.kind === 'draft'
      ? (b.accepted >= 0 ? `kept ${b.accepted}/${b.size - 1}` : 'drafted')
      : `${b.passes} pass${b.passes === 1 ? '' : 'es'}`;
    row.replaceChildren(label, cells, el('span', 'bv-note', note));
  }

  cell(b, p) {
    const c = b.cells[p];
    const d = el('span', 'cell');
    d.dataset.pos = String(p);
    if (b.end != null && p > b.end) {
      d.classList.add('after-end');  // never output: the answer ended before
      return d;
    }
    if (!c) {
      d.classList.add('mask');
      d.title = `position ${p}: still masked`;
      return d;
    }
    d.dataset.pass = String(c.pass);
    const isEnd = b.end === p;
    if (isEnd) {
      d.classList.add('end');  // drawn apart: it ends the answer, its text is never shown
      d.textContent = 'end';
    } else {
      const col = cellColors(c.pass, c.confidence);
      d.style.background = col.bg;
      d.style.color = col.fg;
      d.textContent = cellText(c.text);
    }
    if (b.kind === 'draft' && b.accepted >= 0 && p > 0) d.classList.add(p <= b.accepted ? 'accepted' : 'rejected');
    const conf = c.confidence == null ? 'chosen before the block' : `confidence ${(100 * c.confidence).toFixed(1)} %`;
    const by = c.pass === 0 ? 'pending token' : b.kind === 'draft' ? 'drafted' : `pass ${c.pass}`;
    d.title = `position ${p}: ${JSON.stringify(c.text)} (token ${c.token}), ${by}, ${conf}`;
    return d;
  }
}
