// spice console: a lane's terminal (src/web/terminal/). The agent's PTY as `spice fleet
// attach` sees it, drawn by xterm.js (vendored, loaded on first use): its bytes are
// only ever written into the terminal, never into the page as HTML. Read-only until
// the operator takes the keyboard (recorded in the task's ledger); the keyboard is
// given back with the button, on closing the view, and on leaving the page. While it
// is held, the agent's terminal takes the size of this one.
'use strict';

const term = {
  lane: null,      // the lane shown
  xterm: null,
  fit: null,
  es: null,        // the output stream
  page: null,      // this page's id on the server, from the stream's hello
  held: false,     // whether this page holds the lane's keyboard
  busy: false,     // a take or release is on its way
  queue: '',       // typed, not yet sent
  sending: false,
  sent: '',        // the size last sent, "COLSxROWS"
  retry: null,
  backoff: 1000,   // ms before looking again for a session
};

const backoff = () => (term.backoff = Math.min(30000, term.backoff * 2));

// xterm.js's DOM renderer styles itself with <style> elements (its theme, cell sizes)
// and `style` attributes (24-bit colours), both refused by the console's CSP
// (style-src 'self', nothing inline). Script may still style through the CSSOM, which
// the CSP leaves alone, so both go there: a <style> element asked for is an inert
// <xterm-style> whose text is mirrored into a constructed stylesheet the document
// adopts, and setAttribute('style', …) sets style.cssText. Only this origin's scripts
// can call either, so nothing an injected tag could do is widened.
function bridgeStyles() {
  if (customElements.get('xterm-style')) return;
  customElements.define('xterm-style', class extends HTMLElement {
    connectedCallback() {
      this.hidden = true;
      if (!this.cssSheet) {
        this.cssSheet = new CSSStyleSheet();
        this.watch = new MutationObserver(() => this.cssSheet.replaceSync(this.textContent));
      }
      this.watch.observe(this, { childList: true, characterData: true, subtree: true });
      this.cssSheet.replaceSync(this.textContent);
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, this.cssSheet];
    }
    disconnectedCallback() {
      this.watch.disconnect();
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== this.cssSheet);
    }
  });
  const create = Document.prototype.createElement;
  document.createElement = function (tag, options) {
    return create.call(this, String(tag).toLowerCase() === 'style' ? 'xterm-style' : tag, options);
  };
  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (String(name).toLowerCase() === 'style' && this instanceof HTMLElement) {
      this.style.cssText = value;
      return;
    }
    setAttribute.call(this, name, value);
  };
}

let xtermLoaded = null;
// The vendored files, from this origin, once.
function loadXterm() {
  if (xtermLoaded) return xtermLoaded;
  bridgeStyles();
  const load = (src) => new Promise((ok, fail) => {
    const s = document.createElement('script');
    s.src = src;
    s.onload = ok;
    s.onerror = () => fail(new Error(`could not load ${src}`));
    document.head.append(s);
  });
  const css = document.createElement('link');
  css.rel = 'stylesheet';
  css.href = '/vendor/xterm.css';
  document.head.append(css);
  xtermLoaded = load('/vendor/xterm.js').then(() => load('/vendor/addon-fit.js'));
  return xtermLoaded;
}

const laneUrl = (what) => `/api/lanes/${encodeURIComponent(term.lane)}/terminal/${what}`;

function say(text, cls) {
  $('terminal-msg').className = `small ${cls || ''}`;
  $('terminal-msg').textContent = clean(text);
}

function renderKeyboard() {
  const button = $('terminal-keyboard');
  button.textContent = term.held ? 'Release the keyboard' : 'Take the keyboard';
  button.classList.toggle('hot', term.held);
  button.disabled = !term.page || term.busy;
  $('terminal-section').classList.toggle('held', term.held);
  $('terminal-banner').textContent = term.held
    ? `You have the keyboard of lane ${clean(term.lane)}: what you type reaches its agent, and its terminal takes this one's size. Release it when done (leaving the page does too).`
    : `Read-only: you are watching lane ${clean(term.lane)}. Take the keyboard to type into its agent; taking it is recorded in the task's ledger.`;
  if (term.xterm) term.xterm.options.disableStdin = !term.held;
}

async function openTerminal(lane) {
  $('terminal-section').hidden = false;
  $('terminal-lane').textContent = clean(lane);
  $('terminal-section').scrollIntoView({ block: 'start' });
  if (term.lane === lane && term.es) return;
  await closeTerminal(true);
  term.lane = lane;
  term.backoff = 1000;
  renderKeyboard();
  try {
    await loadXterm();
  } catch (e) {
    say(e.message, 'err');
    return;
  }
  if (!term.xterm) {
    term.xterm = new Terminal({
      disableStdin: true, scrollback: 5000, fontSize: 13, cursorBlink: false,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
      theme: { background: '#1d2329', foreground: '#e8ecf0', cursor: '#e8ecf0' },
    });
    term.fit = new FitAddon.FitAddon();
    term.xterm.loadAddon(term.fit);
    term.xterm.open($('terminal'));
    term.xterm.onData(typed);
    new ResizeObserver(() => refit()).observe($('terminal'));
  }
  term.xterm.reset();
  term.fit.fit();
  connectTerminal();
}

function connectTerminal() {
  clearTimeout(term.retry);
  const lane = term.lane;
  const es = new EventSource(laneUrl('live'));
  const opened = Date.now();
  term.es = es;
  $('terminal-state').textContent = 'connecting…';
  es.addEventListener('hello', (m) => {
    const hello = JSON.parse(m.data);
    term.page = hello.page;
    term.held = false;
    term.sent = '';
    term.xterm.reset();
    $('terminal-state').textContent = 'live';
    say('');
    renderKeyboard();
  });
  es.addEventListener('output', (m) => {
    const raw = atob(m.data);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    term.xterm.write(bytes);
  });
  // The session ended, or there is nothing to attach to: look again shortly (the
  // lane's next session, or its supervisor starting).
  const again = (text, ms) => {
    es.close();
    if (term.es !== es) return;
    term.es = null;
    term.page = null;
    term.held = false;
    $('terminal-state').textContent = clean(text);
    renderKeyboard();
    term.retry = setTimeout(() => { if (term.lane === lane && !term.es) connectTerminal(); }, ms);
  };
  // Quickly after a session that ran a while; backing off to 30 s while there is none.
  es.addEventListener('end', (m) => again(m.data, Date.now() - opened > 10000 ? (term.backoff = 1000) : backoff()));
  es.addEventListener('problem', (m) => again(m.data, backoff()));
  // The connection dropped: the browser reconnects, and the server released the keyboard.
  es.addEventListener('error', () => {
    if (term.es !== es || es.readyState === EventSource.CLOSED) return;
    term.page = null;
    term.held = false;
    $('terminal-state').textContent = 'reconnecting…';
    renderKeyboard();
  });
}

async function toggleKeyboard() {
  if (!term.page) return;
  const take = !term.held;
  term.busy = true;
  renderKeyboard();
  const r = await post(laneUrl('keyboard'), { page: term.page, take });
  term.busy = false;
  renderKeyboard();
  if (!r.ok) {
    say(`${take ? 'take' : 'release'} the keyboard: ${r.body.error}`, 'err');
    return;
  }
  term.held = take;
  say(take ? `keyboard taken (recorded in the ledger of ${r.body.task})` : 'keyboard released', 'ok');
  renderKeyboard();
  if (take) {
    term.sent = '';
    refit();
    term.xterm.focus();
  }
}

function typed(data) {
  if (!term.held) return;
  term.queue += data;
  pump();
}

// One request at a time, so keys arrive in the order typed.
async function pump() {
  if (term.sending) return;
  term.sending = true;
  while (term.queue && term.held && term.page) {
    const data = term.queue;
    term.queue = '';
    const r = await post(laneUrl('input'), { page: term.page, data });
    if (!r.ok) {
      say(`not typed: ${r.body.error}`, 'err');
      if (r.status === 409) { term.held = false; term.queue = ''; renderKeyboard(); }
    }
  }
  term.sending = false;
}

let refitting = null;
// The terminal fills its box; while the keyboard is held, the agent's PTY follows.
function refit() {
  clearTimeout(refitting);
  refitting = setTimeout(async () => {
    if (!term.fit || $('terminal-section').hidden) return;
    term.fit.fit();
    const { cols, rows } = term.xterm;
    const size = `${cols}x${rows}`;
    if (!term.held || !term.page || size === term.sent) return;
    term.sent = size;
    const r = await post(laneUrl('resize'), { page: term.page, cols, rows });
    if (!r.ok) say(`resize: ${r.body.error}`, 'err');
  }, 100);
}

// Gives the keyboard back (keepalive: also while the page is being left) and, unless
// `keep`, hides the view.
async function closeTerminal(keep) {
  clearTimeout(term.retry);
  if (term.held && term.page) releaseNow();
  if (term.es) term.es.close();
  Object.assign(term, { es: null, page: null, held: false, queue: '', lane: keep ? term.lane : null });
  if (!keep) $('terminal-section').hidden = true;
}

function releaseNow() {
  fetch(laneUrl('keyboard'), {
    method: 'POST',
    keepalive: true,
    headers: { 'content-type': 'application/json', 'x-spice': '1' },
    body: JSON.stringify({ page: term.page, take: false }),
  }).catch(() => {});
}

document.addEventListener('DOMContentLoaded', () => {
  $('terminal-keyboard').addEventListener('click', toggleKeyboard);
  $('terminal-close').addEventListener('click', () => closeTerminal(false));
  window.addEventListener('resize', refit);
  window.addEventListener('pagehide', () => { if (term.held && term.page) releaseNow(); });
});
