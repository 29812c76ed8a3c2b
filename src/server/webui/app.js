// The page: settings, the API key, conversations, sending and stopping. Drawing a message is
// chat_view.js's, the block view blocks.js's, the requests api.js's, storage store.js's.
import { AuthError, chatBody, fetchModel, streamChat } from './api.js';
import { MessageView } from './chat_view.js';
import * as store from './store.js';

const $ = (id) => document.getElementById(id);

const state = {
  settings: store.loadSettings(),
  conversations: store.loadConversations(),
  current: null,   // the open conversation
  key: store.apiKey.get(),
  model: null,
  running: null,   // {controller, view} while an answer streams
  needKey: false,  // the server refused the key (or none was given): the dialog stays up
};

// ---- settings ---------------------------------------------------------------------------------

function bindSettings() {
  const s = state.settings;
  for (const r of document.querySelectorAll('input[name=mode]')) {
    r.checked = r.value === s.mode;
    r.addEventListener('change', () => { s.mode = r.value; syncSettings(); });
  }
  const sliders = [['threshold', (v) => v.toFixed(2)], ['temperature', (v) => v.toFixed(2)]];
  for (const [id, fmt] of sliders) {
    const input = $(id);
    input.value = String(s[id]);
    $(`${id}-out`).textContent = fmt(s[id]);
    input.addEventListener('input', () => {
      s[id] = Number(input.value);
      $(`${id}-out`).textContent = fmt(s[id]);
      syncSettings();
    });
  }
  $('thinking').checked = s.thinking;
  $('thinking').addEventListener('change', () => { s.thinking = $('thinking').checked; syncSettings(); });
  $('system-prompt').value = s.system;
  $('system-prompt').addEventListener('input', () => { s.system = $('system-prompt').value; syncSettings(); });
  $('use-tools').checked = s.useTools;
  $('use-tools').addEventListener('change', () => { s.useTools = $('use-tools').checked; syncSettings(); });
  $('tools').value = s.tools;
  $('tools').addEventListener('input', () => { s.tools = $('tools').value; syncSettings(); });
  $('max-tokens').value = String(s.maxTokens);
  $('max-tokens').addEventListener('input', () => {
    const n = Number($('max-tokens').value);
    if (Number.isInteger(n) && n > 0) { s.maxTokens = n; syncSettings(); }
  });
  $('settings-toggle').addEventListener('click', () => {
    const open = $('settings').hidden;
    $('settings').hidden = !open;
    $('settings-toggle').setAttribute('aria-expanded', String(open));
  });
  syncSettings();
}

function syncSettings() {
  const s = state.settings;
  // The threshold only steers diffusion; guess-then-verify keeps what the causal pass agrees with.
  $('threshold').disabled = s.mode !== 'diffusion';
  $('tools').disabled = !s.useTools;
  store.saveSettings(s);
}

// The tools to send, or an error message for the settings panel.
function toolsToSend() {
  const s = state.settings;
  if (!s.useTools) return { tools: null };
  try {
    const t = JSON.parse(s.tools);
    if (!Array.isArray(t)) return { error: 'tools must be a JSON array of {"type": "function", "function": {...}}' };
    return { tools: t };
  } catch (e) {
    return { error: `tools are not valid JSON: ${e.message}` };
  }
}

// ---- the API key --------------------------------------------------------------------------------

function askForKey(message) {
  const dlg = $('key-dialog');
  $('key-error').hidden = !message;
  $('key-error').textContent = message ?? '';
  $('key-input').value = '';
  state.needKey = true;
  setReady(false);
  if (!dlg.open) dlg.showModal();
  $('key-input').focus();
}

function bindKeyDialog() {
  $('key-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const key = $('key-input').value.trim();
    if (!key) return;
    try {
      state.model = await fetchModel(key);
    } catch (err) {
      askForKey(err instanceof AuthError ? 'The server refused this key.' : err.message);
      return;
    }
    state.key = key;
    state.needKey = false;
    store.apiKey.set(key);
    $('key-dialog').close();
    modelReady();
  });
  // Escape would leave a page that cannot talk to the server: keep the dialog up (browsers let a
  // page cancel Escape only now and then, so a close without a key opens it again).
  $('key-dialog').addEventListener('cancel', (e) => e.preventDefault());
  $('key-dialog').addEventListener('close', () => {
    if (state.needKey) $('key-dialog').showModal();
  });
  $('forget-key').addEventListener('click', () => {
    store.apiKey.clear();
    state.key = '';
    askForKey();
  });
}

async function connect() {
  try {
    state.model = await fetchModel(state.key);
  } catch (err) {
    if (err instanceof AuthError) {
      askForKey(state.key ? 'The stored key was refused.' : null);
      return;
    }
    $('model-info').textContent = `cannot reach the server: ${err.message}`;
    setTimeout(connect, 2000);  // restarting, or not up yet
    return;
  }
  if (!state.model.meta?.n_vocab) {  // listening, the model still loading
    $('model-info').textContent = 'loading the model…';
    setTimeout(connect, 1000);
    return;
  }
  modelReady();
}

function modelReady() {
  const m = state.model;
  const meta = m.meta ?? {};
  const info = [m.id];
  if (meta.n_params) info.push(`${(meta.n_params / 1e6).toFixed(2)}M parameters`);
  if (meta.n_ctx) info.push(`context ${meta.n_ctx}`);
  if (meta.block_size) info.push(`block ${meta.block_size}`);
  $('model-info').textContent = info.join(' · ');
  $('forget-key').hidden = !state.key;
  // Diffusion and guess-then-verify need the model's in-block path.
  const denoise = meta.can_denoise !== false;
  for (const r of document.querySelectorAll('input[name=mode]')) {
    if (r.value !== 'ar') r.disabled = !denoise;
  }
  if (!denoise && state.settings.mode !== 'ar') {
    state.settings.mode = 'ar';
    document.querySelector('input[name=mode][value=ar]').checked = true;
    syncSettings();
  }
  setReady(true);
}

function setReady(ready) {
  $('send').disabled = !ready || !!state.running;
  $('prompt').disabled = !ready;
  document.body.dataset.ready = String(ready);
}

// ---- conversations ------------------------------------------------------------------------------

function save() {
  store.saveConversations(state.conversations);
  drawConversationList();
}

function drawConversationList() {
  const ul = $('conversations');
  ul.replaceChildren(...state.conversations.map((c) => {
    const li = document.createElement('li');
    li.className = c === state.current ? 'active' : '';
    const open = document.createElement('button');
    open.className = 'conv';
    open.textContent = c.title;
    open.addEventListener('click', () => openConversation(c));
    const del = document.createElement('button');
    del.className = 'ghost small del';
    del.textContent = '×';
    del.title = 'delete this conversation';
    del.addEventListener('click', () => deleteConversation(c));
    li.append(open, del);
    return li;
  }));
}

function openConversation(c) {
  if (state.running) return;
  state.current = c;
  const box = $('messages');
  box.replaceChildren(...c.messages.map((m) => new MessageView(m).root));
  if (!c.messages.length) box.append(welcome());
  box.scrollTop = box.scrollHeight;
  drawConversationList();
}

function deleteConversation(c) {
  if (state.running && state.current === c) return;
  state.conversations = state.conversations.filter((x) => x !== c);
  if (state.current === c) openConversation(state.conversations[0] ?? startConversation());
  save();
}

function startConversation() {
  const c = store.newConversation();
  state.conversations.unshift(c);
  return c;
}

function welcome() {
  const d = document.createElement('div');
  d.className = 'welcome';
  d.innerHTML = '<h1>clover</h1><p>A block-diffusion language model: in diffusion mode each answer is written as blocks of ' +
    'positions that fill in over a few passes, drawn below the answer as they happen.</p>';
  for (const q of ['What is the capital of Australia? One word.', 'Is it warmer in Lisbon or in Oslo?',
    'Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4. Reply with the JSON list of orders.']) {
    const b = document.createElement('button');
    b.className = 'ghost suggestion';
    b.textContent = q;
    b.addEventListener('click', () => { $('prompt').value = q; $('prompt').focus(); });
    d.append(b);
  }
  return d;
}

// What the API gets of a stored message.
function apiMessage(m) {
  if (m.role === 'user') return { role: 'user', content: m.content };
  const out = { role: 'assistant', content: m.content ?? '' };
  if (m.tool_calls?.length) out.tool_calls = m.tool_calls;
  return out;
}

// ---- sending ------------------------------------------------------------------------------------

async function send(text) {
  const { tools, error } = toolsToSend();
  $('tools-error').hidden = !error;
  $('tools-error').textContent = error ?? '';
  if (error) {
    $('settings').hidden = false;
    return;
  }
  const c = state.current;
  const s = { ...state.settings, tools };
  const history = c.messages.filter((m) => !m.error).map(apiMessage);
  const user = { role: 'user', content: text };
  c.messages.push(user);
  if (c.title === 'New chat') c.title = text.length > 48 ? `${text.slice(0, 45)}…` : text;
  const reply = { role: 'assistant', content: '', reasoning: '', mode: s.mode, state: 'streaming', passes: [] };
  c.messages.push(reply);
  const box = $('messages');
  box.querySelector('.welcome')?.remove();
  box.append(new MessageView(user).root);
  const view = new MessageView(reply);
  box.append(view.root);
  box.scrollTop = box.scrollHeight;

  const messages = [...(s.system.trim() ? [{ role: 'system', content: s.system.trim() }] : []), ...history, { role: 'user', content: text }];
  const controller = new AbortController();
  state.running = { controller, view };
  $('stop').hidden = false;
  $('send').hidden = true;
  const t0 = performance.now();
  try {
    await streamChat(chatBody(messages, s), state.key, controller.signal, {
      delta: (d) => { view.delta(d); box.scrollTop = box.scrollHeight; },
      pass: (ev) => view.pass(ev),
      done: (end) => {
        const t = end.timings;
        reply.stats = {
          tokens: end.usage?.completion_tokens ?? t?.predicted_n,
          tokensPerSecond: t?.predicted_per_second ?? null,
          seconds: (performance.now() - t0) / 1000,
          finish: end.finish_reason,
        };
      },
    });
    reply.state = 'done';
  } catch (err) {
    if (err.name === 'AbortError') {
      reply.state = 'stopped';
    } else {
      reply.state = 'done';
      reply.error = err.message;
      if (err instanceof AuthError) askForKey('The server refused the key.');
    }
  } finally {
    state.running = null;
    $('stop').hidden = true;
    $('send').hidden = false;
    view.done();
    setReady(!!state.model && !$('key-dialog').open);
    save();
  }
}

function bindComposer() {
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || state.running || $('send').disabled) return;
    $('prompt').value = '';
    send(text);
  });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => state.running?.controller.abort());
  $('new-chat').addEventListener('click', () => {
    if (state.running) return;
    const empty = state.conversations.find((c) => !c.messages.length);
    openConversation(empty ?? startConversation());
    save();
  });
}

// ---- start --------------------------------------------------------------------------------------

bindSettings();
bindKeyDialog();
bindComposer();
// An answer interrupted by closing the page stays as far as it got.
for (const c of state.conversations) for (const m of c.messages) if (m.state === 'streaming') m.state = 'stopped';
openConversation(state.conversations[0] ?? startConversation());
save();
setReady(false);
connect();
