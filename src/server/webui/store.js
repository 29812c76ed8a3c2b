// What the page keeps in the browser (localStorage): the API key, the settings and the
// conversations. Nothing leaves the browser except the requests to this server.

const KEY = 'clover.apiKey';
const SETTINGS = 'clover.settings';
const CONVERSATIONS = 'clover.conversations';

export const DEFAULT_TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' } }, required: ['city'] },
  },
}];

const DEFAULT_SETTINGS = {
  mode: 'diffusion', threshold: 0.95, temperature: 0, thinking: true, system: '',
  useTools: false, tools: JSON.stringify(DEFAULT_TOOLS, null, 2), maxTokens: 512,
};

function read(name, fallback) {
  try {
    const v = localStorage.getItem(name);
    return v === null ? fallback : JSON.parse(v);
  } catch {
    return fallback;  // storage disabled or a value from another version of the page
  }
}

function write(name, value) {
  try {
    localStorage.setItem(name, JSON.stringify(value));
    return true;
  } catch {
    return false;  // full (pass events of long answers are the big part) or disabled
  }
}

export const apiKey = {
  get: () => read(KEY, ''),
  set: (k) => write(KEY, k),
  clear: () => localStorage.removeItem(KEY),
};

export function loadSettings() {
  return { ...DEFAULT_SETTINGS, ...read(SETTINGS, {}) };
}

export function saveSettings(s) {
  write(SETTINGS, s);
}

// Conversations: [{id, title, created, messages: [...]}], newest first.
export function loadConversations() {
  const list = read(CONVERSATIONS, []);
  return Array.isArray(list) ? list : [];
}

export function saveConversations(list) {
  if (write(CONVERSATIONS, list)) return;
  // Over the quota: keep the text, drop the recorded passes of older answers, newest last.
  const slim = structuredClone(list);
  for (const conv of slim.slice(1)) for (const m of conv.messages) delete m.passes;
  write(CONVERSATIONS, slim);
}

export function newConversation() {
  return { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`, title: 'New chat', created: Date.now(), messages: [] };
}
