// spice console. Every piece of agent or operator text is put on the page with
// textContent / createTextNode, never as HTML: a hostile transcript stays text.
'use strict';

const $ = (id) => document.getElementById(id);
const SVG = 'http://www.w3.org/2000/svg';

const state = {
  status: null,
  offset: 0,            // server clock minus ours, in ms
  lane: null,           // the selected lane's name
  transcript: null,     // {path, epoch, first, last}
  tail: null,           // the transcript EventSource
  cat: 'ready',
  q: '',
  taskLimit: 100,
  ledger: null,         // the task whose ledger is shown
  tasksDue: 0,          // when the task table may be fetched again
};

// Control characters become visible stand-ins; bidi controls become U+FFFD.
function clean(s) {
  if (s == null) return '';
  return String(s)
    .replace(/[\u0000-\u0008\u000b-\u001f]/g, (c) => String.fromCharCode(0x2400 + c.charCodeAt(0)))
    .replace(/\u007f/g, '\u2421')
    .replace(/[\u0080-\u009f]/g, '\ufffd')
    .replace(/[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g, '\ufffd');
}

// el('td', {class: 'x'}, 'text', child…): strings become text nodes.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = clean(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const k of kids) {
    if (k == null) continue;
    e.append(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(clean(k)) : k);
  }
  return e;
}

async function api(path) {
  const r = await fetch(path, { headers: { accept: 'application/json' } });
  const j = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  if (!r.ok) throw new Error(j.error || `HTTP ${r.status}`);
  return j;
}

async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-spice': '1' },
    body: JSON.stringify(body),
  });
  const j = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  return { ok: r.ok, status: r.status, body: j };
}

const now = () => Date.now() + state.offset;

// Written as the CLI writes them (`when::span`): 45s, 1m8s, 2h5m, 3d4h.
function span(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

function localTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d) ? '' : d.toLocaleString();
}

// A cell whose text follows the clock: "in 4m" / "stale 2m" / "3s ago".
function rel(iso, mode) {
  const e = el('span', { class: 'rel', 'data-t': iso || '', 'data-mode': mode });
  tickOne(e);
  return e;
}
function tickOne(e) {
  const iso = e.dataset.t;
  if (!iso) { e.textContent = '–'; return; }
  const d = new Date(iso).getTime() - now();
  if (e.dataset.mode === 'lease') {
    e.textContent = d >= 0 ? `${span(d)} left` : `stale ${span(d)}`;
    e.classList.toggle('stale', d < 0);
  } else {
    e.textContent = `${span(d)} ago`;
  }
  e.title = localTime(iso);
}
function tick() { document.querySelectorAll('.rel').forEach(tickOne); }

// ---- status: lanes and claims -------------------------------------------------

async function refreshStatus() {
  const t0 = Date.now();
  // The three documents at once: the page waits for the slowest, not for their sum.
  const timed = api('/api/status').then((s) => ({ s, t1: Date.now() }));
  const [{ s, t1 }, gate, conscience] = await Promise.all([timed, api('/api/gate'), api('/api/conscience')]);
  state.offset = new Date(s.now).getTime() - (t0 + t1) / 2;
  state.status = s;
  renderNeeds(s);
  renderLanes(s);
  tellNeeds(s);
  renderClaims(s);
  renderGates(gate);
  renderConscience(conscience);
  $('summary').textContent = `${s.lanes.length} lane(s), ${s.claims.length} claim(s), ${s.pending_steering} pending steering`;
  refreshAtLapse(s);
}

// A lease that lapses changes nothing in the store, so nothing announces it: the page
// refreshes itself just after the next live lease ends, and the claim enters the queue
// as stale then, not at the next unrelated change.
state.lapse = null;
function refreshAtLapse(s) {
  clearTimeout(state.lapse);
  const t = now();
  const next = Math.min(...s.claims.filter((c) => !c.stale).map((c) => new Date(c.lease_until).getTime()).filter((d) => d > t));
  if (Number.isFinite(next)) state.lapse = setTimeout(refreshSoon, Math.min(next - t + 300, 2 ** 31 - 1));
}

// ---- what needs the operator, first ---------------------------------------------

const NEED_WORDS = {
  asking: 'asks', budget: 'budget paused', held: 'held', merge_refused: 'merge refused',
  error: 'error', stale_claim: 'stale claim', proposal: 'maxim proposal',
};

// Replies being written survive the re-renders a live page does on every change.
state.drafts = {};
const needKey = (n) => `${n.kind}:${n.lane || ''}:${n.task_id || ''}`;

// One entry per thing only the operator can resolve, most urgent first, each with the
// control that resolves it in place (the CLI command beside it).
function renderNeeds(s) {
  const focused = document.activeElement && document.activeElement.dataset.need;
  const laneOf = (n) => s.lanes.find((l) => l.lane === n.lane);
  const items = s.needs.map((n) => {
    const key = needKey(n);
    let action = null;
    if (n.kind === 'asking') {
      const box = el('textarea', { rows: 2, maxlength: 60000, 'data-need': key, 'aria-label': `reply to lane ${n.lane}`,
        placeholder: 'your answer', oninput: (ev) => { state.drafts[key] = ev.target.value; } });
      box.value = state.drafts[key] || '';
      const msg = el('span', { role: 'status', class: 'small' });
      action = el('form', { class: 'reply-form', onsubmit: (ev) => replyTo(ev, n, box, msg) },
        box, el('button', { type: 'submit' }, 'Reply'), msg);
    } else if (n.kind === 'held') {
      action = el('button', { type: 'button', class: 'lift', onclick: () => liftHold(n.lane) }, 'lift hold');
    } else if (n.kind === 'budget' && laneOf(n)) {
      action = el('span', {},
        el('button', { type: 'button', class: 'budget-raise', onclick: () => raiseBudget(laneOf(n)) }, 'raise budget'), ' ',
        el('button', { type: 'button', class: 'budget-stop', onclick: () => stopBudget(laneOf(n)) }, 'stop'));
    } else if (n.kind === 'stale_claim') {
      action = el('button', { type: 'button', class: 'takeover hot', onclick: () => takeover(n.task_id, n.task, n.fence) }, 'take over');
    } else if (n.kind === 'merge_refused') {
      const f = n.findings || {};
      action = f.output !== undefined ? el('pre', { class: 'small' }, f.output || '') : findingList(f.findings, f.could_not_run);
    } else if (n.kind === 'proposal' && n.task_id) {
      action = el('button', { type: 'button', onclick: () => showLedger(n.task_id) }, 'show');
    } else if (n.lane) {
      action = el('button', { type: 'button', onclick: () => selectLane(n.lane) }, 'open lane');
    }
    const budget = n.kind === 'budget' && n.limit != null ? ` (${n.used} of ${n.limit} tokens)` : '';
    return el('li', { class: `need need-${n.kind}`, 'data-kind': n.kind, 'data-lane': n.lane || '', 'data-task': n.task_id || '' },
      el('div', { class: 'need-head' },
        el('span', { class: `badge nd-${n.kind}` }, NEED_WORDS[n.kind] || n.kind), ' ',
        n.lane ? el('strong', {}, n.lane) : null, ' ',
        n.task ? el('code', { class: 'small' }, n.task) : null, ' ',
        el('span', { class: 'muted small' }, 'since ', rel(n.since, 'ago'))),
      el('div', { class: 'need-what' }, n.what + budget),
      action ? el('div', { class: 'need-action' }, action) : null,
      el('div', { class: 'muted small mono need-cli' }, n.resolve));
  });
  $('needs').replaceChildren(...items);
  $('needs-empty').hidden = items.length > 0;
  $('needs-count').textContent = items.length ? `(${items.length})` : '';
  if (focused) {
    const box = document.querySelector(`#needs textarea[data-need="${CSS.escape(focused)}"]`);
    if (box) box.focus();
  }
}

// A reply to an asking lane goes the way steering an idle agent does: an item for the
// lane, typed into its agent, pending until it answers.
async function replyTo(ev, n, box, msg) {
  ev.preventDefault();
  const text = box.value.trim();
  if (!text) return;
  const r = await post('/api/steer', { target: `lane:${n.lane}`, text });
  if (r.ok) {
    delete state.drafts[needKey(n)];
    box.value = '';
    msg.className = 'ok small';
    msg.textContent = `sent ${r.body.key}`;
  } else {
    msg.className = 'err small';
    msg.textContent = clean(r.body.error);
  }
  refreshSoon();
}

// What each state is called on the page.
const STATE_WORDS = {
  waiting: 'done with its turn',
  asking: 'needs you',
  subagent: 'waiting on its sub-agent',
};

// The tab's title counts what needs the operator (the queue at the top); with the
// browser's notifications turned on (opt-in, the checkbox), each entry that enters
// the queue is told once.
function tellNeeds(s) {
  const needs = s.needs || [];
  document.title = needs.length ? `(${needs.length}) spice console` : 'spice console';
  const before = state.told;
  const now = {};
  for (const n of needs) {
    const key = needKey(n);
    now[key] = true;
    if (before && !before[key] && notifyOn()) {
      const who = n.lane ? `lane ${n.lane}` : (n.task || 'spice');
      new Notification(`spice: ${who}: ${NEED_WORDS[n.kind] || n.kind}`, { body: clean(n.what), tag: `spice-${key}` });
    }
  }
  state.told = now;
}

function notifyOn() {
  return $('notify').checked && 'Notification' in window && Notification.permission === 'granted';
}

function setupNotify() {
  const box = $('notify');
  if (!('Notification' in window)) { box.disabled = true; return; }
  box.checked = localStorage.getItem('spice-notify') === 'on' && Notification.permission === 'granted';
  box.addEventListener('change', async () => {
    if (box.checked && Notification.permission !== 'granted') {
      box.checked = (await Notification.requestPermission()) === 'granted';
    }
    localStorage.setItem('spice-notify', box.checked ? 'on' : 'off');
  });
}

function renderLanes(s) {
  const body = $('lanes').tBodies[0];
  body.replaceChildren(...s.lanes.map((l) => {
    const task = l.task ? el('span', {}, el('code', {}, l.task.handle), ' ', l.task.description) : '–';
    const atBudget = l.state === 'held' && l.hold && !l.hold.until;
    const lift = l.state === 'held' && !atBudget
      ? el('button', { type: 'button', class: 'lift', onclick: (ev) => { ev.stopPropagation(); liftHold(l.lane); } }, 'lift hold')
      : null;
    const budgetButtons = atBudget
      ? [el('button', { type: 'button', class: 'budget-raise', onclick: (ev) => { ev.stopPropagation(); raiseBudget(l); } }, 'raise budget'),
        el('button', { type: 'button', class: 'budget-stop', onclick: (ev) => { ev.stopPropagation(); stopBudget(l); } }, 'stop')]
      : [];
    const b = l.budget && l.budget.lane;
    const tokens = b ? (b.limit ? `${b.used} / ${b.limit}` : String(b.used)) : '–';
    const row = el('tr', { 'data-lane': l.lane, class: l.lane === state.lane ? 'selected' : '', onclick: () => selectLane(l.lane) },
      el('td', {}, el('strong', {}, l.lane),
        l.host ? el('div', { class: `small lane-host${l.host_lost ? ' err' : ' muted'}`, title: 'the host whose supervisor runs the lane' },
          l.host_lost ? `on ${l.host} (host lost)` : `on ${l.host}`) : null),
      el('td', { 'data-label': 'profile' }, l.profile || '–',
        l.sandbox ? el('div', { class: `small lane-sandbox${l.sandbox.startsWith('confined') ? ' muted' : ' err'}`, title: 'what the agent may write (docs/security.md)' }, l.sandbox) : null,
        l.reads ? el('div', { class: 'small muted lane-io', title: 'where spice reads the agent\'s replies, and how steering reaches it while it works' },
          `reads ${l.reads === 'terminal' ? 'its terminal' : l.reads === 'none' ? 'nothing' : `its ${l.reads} transcript`} · steered by ${l.delivers}`) : null),
      el('td', { 'data-label': 'state' }, el('span', { class: `badge st-${l.state}` }, STATE_WORDS[l.state] || l.state),
        l.state_note ? el('div', { class: 'small muted state-note' }, l.state_note) : null),
      el('td', { class: 'mono small', 'data-label': 'session' }, l.session || '–'),
      el('td', { 'data-label': 'task' }, task),
      el('td', { 'data-label': 'phase' }, l.task ? l.task.phase : '–'),
      el('td', { 'data-label': 'lease' }, l.claims.length ? rel(l.claims[0].lease_until, 'lease') : '–'),
      el('td', { 'data-label': 'active' }, rel(l.last_activity, 'ago')),
      el('td', { class: l.pending_steering ? 'pending' : '', 'data-label': 'pending' }, String(l.pending_steering)),
      el('td', { class: `tokens${atBudget ? ' err' : ''}`, title: atBudget ? l.hold.reason : '', 'data-label': 'tokens' }, tokens),
      el('td', {}, lift, ...budgetButtons,
        l.task ? el('button', { type: 'button', class: 'review', onclick: (ev) => { ev.stopPropagation(); openReview(l.task.id); } }, 'review') : null,
        el('button', { type: 'button', class: 'terminal', onclick: (ev) => { ev.stopPropagation(); openTerminal(l.lane); } }, 'terminal'),
        l.last_error ? el('span', { class: 'err small lane-error' }, 'error: ', l.last_error) : null));
    // A phone shows a lane as a card: cells with nothing to say are left out there.
    for (const td of row.cells) if (td.textContent === '–' || td.textContent === '') td.classList.add('blank');
    return row;
  }));
  $('lanes-empty').hidden = s.lanes.length > 0;
}

function renderClaims(s) {
  const body = $('claims').tBodies[0];
  body.replaceChildren(...s.claims.map((c) => el('tr', { 'data-task': c.id, class: c.stale ? 'stale-row' : '' },
    el('td', {}, el('a', { href: '#', onclick: (ev) => { ev.preventDefault(); showLedger(c.id); } }, c.task)),
    el('td', {}, c.description),
    el('td', { class: 'mono small' }, c.session),
    el('td', {}, c.lane || '–'),
    el('td', { class: 'mono small' }, c.worktree || '–'),
    el('td', { class: 'fence' }, String(c.fence)),
    el('td', { class: 'small' }, localTime(c.lease_until)),
    el('td', {}, rel(c.lease_until, 'lease')),
    // Only a stale claim is offered to take over: a live one is its holder's, taken
    // only behind "force" and a confirmation (never from whom it would go to).
    el('td', {}, c.stale ? el('button', {
      type: 'button', class: 'takeover hot',
      'data-fence': c.fence, onclick: () => takeover(c.id, c.task, c.fence),
    }, 'Take over') : el('span', { class: 'muted small' }, 'live ',
      c.session === taker() ? null : el('button', {
        type: 'button', class: 'force-takeover small', title: 'take this live claim from its holder',
        onclick: () => forceTakeover(c),
      }, 'force…'))))));
  $('claims-empty').hidden = s.claims.length > 0;
}

// One finding as the hook printed it: where, which rule, the value against its limit.
function findingText(f) {
  if (f.path === undefined) return `commit message line ${f.line}: ${f.rule}: ${f.message}`;
  const at = f.routine ? `${f.path}:${f.line} ${f.routine}` : f.path;
  return `${at}: ${f.rule} ${f.value} > ${f.limit}${f.latched ? ' (latched)' : ''}: ${f.message}`;
}

function findingList(fs, notRun) {
  const items = [...(fs || []).map(findingText), ...(notRun || []).map((n) => `${n.rule}${n.path ? ` ${n.path}` : ''} could not run: ${n.why}`)];
  return items.length ? el('ul', { class: 'findings small mono' }, ...items.map((t) => el('li', {}, t))) : null;
}

function renderGates(g) {
  const body = $('gates').tBodies[0];
  body.replaceChildren(...g.lanes.map((l) => {
    const r = l.last_run;
    const problems = r ? (r.findings || r.message || []) : [];
    const verdict = !r ? el('span', { class: 'muted' }, 'none yet')
      : el('span', {}, el('span', { class: `badge ${r.clean ? 'it-acked' : 'it-refused'}` }, r.clean ? 'passed' : 'refused'),
        ' ', r.hook, ' ', rel(r.at, 'ago'));
    const refused = l.refused
      ? el('span', {}, el('span', { class: 'badge it-refused' }, 'merge refused'), ' ', rel(l.refused.at, 'ago'), findingList(l.refused.findings, l.refused.could_not_run))
      : '–';
    const bypasses = l.bypasses.length
      ? el('ul', { class: 'bypasses small' }, ...l.bypasses.map((b) => el('li', {}, el('span', { class: 'badge it-refused' }, 'bypass'), ' ', b.kind || '', ' ', b.commit ? el('code', {}, b.commit.slice(0, 10)) : null, ' ', b.detail || '')))
      : '–';
    return el('tr', { 'data-gate-lane': l.lane || '', class: (r && !r.clean) || l.refused || l.bypasses.length ? 'gate-hot' : '' },
      el('td', {}, l.lane ? el('strong', {}, l.lane) : '–'),
      el('td', { class: 'mono small' }, l.handle || l.task),
      el('td', {}, verdict),
      el('td', {}, r && !r.clean ? findingList(problems, r.could_not_run) : '–'),
      el('td', {}, refused),
      el('td', {}, bypasses));
  }));
  // The lane's row says so too: the operator sees it without scrolling.
  for (const l of g.lanes) {
    const hot = (l.last_run && !l.last_run.clean) || l.refused || l.bypasses.length;
    const row = document.querySelector(`#lanes tr[data-lane="${CSS.escape(l.lane)}"]`);
    if (hot && row && l.lane) {
      const what = l.bypasses.length ? 'gate bypassed' : l.refused ? 'merge refused by the gate' : 'commit refused by the gate';
      row.lastElementChild.append(el('span', { class: 'badge it-refused gate-flag' }, what));
    }
  }
  $('gates-empty').hidden = g.lanes.some((l) => l.last_run || l.refused || l.bypasses.length);
  const latches = g.repositories.flatMap((repo) => repo.error
    ? [el('tr', {}, el('td', { class: 'mono small' }, repo.common_dir), el('td', { class: 'err', colspan: 5 }, repo.error))]
    : repo.latches.map((x) => el('tr', {},
      el('td', { class: 'mono small' }, repo.common_dir),
      el('td', { class: 'mono' }, x.path),
      el('td', {}, x.rule),
      el('td', {}, String(x.value)),
      el('td', {}, String(x.base)),
      el('td', {}, rel(x.since, 'ago')))));
  $('latches').tBodies[0].replaceChildren(...latches);
  $('latches-empty').hidden = latches.length > 0;
}

// The conscience's log, newest first: each step, and the answer each reminder got.
function renderConscience(c) {
  const badge = { published: 'it-pending', acked: 'it-acked', nacked: 'it-refused', expired: 'it-expired',
    abandoned: 'it-refused', disputed: 'it-refused' };
  const steps = [...c.steps].reverse();
  $('conscience').tBodies[0].replaceChildren(...steps.map((e) => {
    const d = e.detail || {};
    const what = d.judge ? `judge ${d.judge} (attempt ${d.attempt}): ${d.raw}` : (d.sentence || d.body || d.why || '');
    return el('tr', { 'data-step': e.step },
      el('td', {}, rel(e.at, 'ago')),
      el('td', {}, el('strong', {}, e.lane)),
      el('td', {}, e.maxim),
      el('td', {}, String(e.epoch)),
      el('td', {}, el('span', { class: `badge ${badge[e.step] || ''}` }, e.step)),
      el('td', { class: 'mono small' }, e.key || '–'),
      el('td', { class: 'small' }, what));
  }));
  $('conscience-empty').hidden = c.steps.length > 0;
}

// Who a takeover gives the claim to.
function taker() {
  return $('claimant').value.trim() || 'operator';
}

// A live claim's holder is working: taking it stops that agent, so the operator says so twice.
function forceTakeover(c) {
  const ask = `Take ${c.task} from ${c.session} while its lease is live?\n\n` +
    `Its agent${c.lane ? ` in lane ${c.lane}` : ''} is stopped when it next renews; its worktree stays.`;
  if (window.confirm(ask)) takeover(c.id, c.task, c.fence, true);
}

async function takeover(id, handle, fence, force = false) {
  const msg = $('takeover-msg');
  msg.className = '';
  msg.textContent = `taking over ${handle} (fence ${fence})…`;
  const r = await post('/api/takeover', { task: id, fence, force, claimant: taker() });
  if (r.ok) {
    msg.className = 'ok';
    msg.textContent = `took over ${r.body.handle}${force ? ' (forced)' : ''}: now held by ${r.body.claimant} (fence ${r.body.fence})`;
  } else {
    msg.className = 'err';
    msg.textContent = `refused: ${r.body.error}`;
  }
  refreshSoon();
}

// The crossed budget: the task's when it is the one crossed, else the lane's.
function crossedScope(l) {
  const t = l.budget.task;
  return t && t.limit !== null && t.used >= t.limit && l.task ? { task: l.task.id, b: t } : { b: l.budget.lane };
}

async function raiseBudget(l) {
  const { task, b } = crossedScope(l);
  const answer = prompt(`New token budget for ${task ? 'the task' : 'lane ' + l.lane} (used ${b.used}):`, String(Math.max(b.used, b.limit || 0) * 2));
  if (answer === null) return;
  const tokens = Number(answer.replace(/[_,\s]/g, ''));
  if (!Number.isSafeInteger(tokens) || tokens <= 0) { alert(`not a number of tokens: ${answer}`); return; }
  const body = task ? { action: 'raise', tokens, task } : { action: 'raise', tokens };
  const r = await post(`/api/lanes/${encodeURIComponent(l.lane)}/budget`, body);
  if (!r.ok) alert(`raise budget: ${r.body.error}`);
  refreshSoon();
}

async function stopBudget(l) {
  if (!confirm(`Stop lane ${l.lane}? Its session ends as on fleet down; the claim is kept.`)) return;
  const { task } = crossedScope(l);
  const body = task ? { action: 'stop', task } : { action: 'stop' };
  const r = await post(`/api/lanes/${encodeURIComponent(l.lane)}/budget`, body);
  if (!r.ok) alert(`stop: ${r.body.error}`);
  refreshSoon();
}

async function liftHold(name) {
  const r = await post(`/api/lanes/${encodeURIComponent(name)}/lift-hold`, {});
  if (!r.ok) alert(`lift hold: ${r.body.error}`);
  refreshSoon();
}

// ---- one lane: transcript and inbox --------------------------------------------

function selectLane(name) {
  if (state.lane === name) return;
  state.lane = name;
  document.querySelectorAll('#lanes tr[data-lane]').forEach((r) => r.classList.toggle('selected', r.dataset.lane === name));
  $('lane-detail').hidden = false;
  $('lane-name').textContent = clean(name);
  $('steer-msg').textContent = '';
  loadTranscript();
  refreshInbox();
}

function closeTail() {
  if (state.tail) { state.tail.close(); state.tail = null; }
}

async function loadTranscript() {
  closeTail();
  const lane = state.lane;
  const list = $('transcript');
  list.replaceChildren();
  let page;
  try {
    page = await api(`/api/lanes/${encodeURIComponent(lane)}/transcript?limit=200`);
  } catch (e) {
    $('transcript-problem').textContent = clean(e.message);
    return;
  }
  if (lane !== state.lane) return;
  state.transcript = { path: page.path, epoch: page.epoch, first: page.events.length ? page.events[0].line : 0, last: page.last_line };
  $('transcript-path').textContent = clean(page.path || '');
  $('transcript-problem').textContent = clean(page.problem || '');
  $('older').hidden = !page.more;
  list.append(...page.events.map(eventItem).filter(Boolean));
  list.scrollTop = list.scrollHeight;
  const q = new URLSearchParams({ after: String(page.last_line), epoch: String(page.epoch) });
  if (page.path) q.set('path', page.path);
  const es = new EventSource(`/api/lanes/${encodeURIComponent(lane)}/transcript/live?${q}`);
  state.tail = es;
  es.addEventListener('events', (m) => {
    const evs = JSON.parse(m.data);
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    for (const ev of evs) {
      const item = eventItem(ev);
      if (item) list.append(item);
      if (ev.type === 'assistant_text') speak(ev.text);
      state.transcript.last = ev.line;
    }
    if (atBottom) list.scrollTop = list.scrollHeight;
  });
  es.addEventListener('reset', () => { if (lane === state.lane) loadTranscript(); });
  es.addEventListener('problem', (m) => { $('transcript-problem').textContent = clean(m.data); });
}

async function olderEvents() {
  const t = state.transcript;
  if (!t || !t.first) return;
  const page = await api(`/api/lanes/${encodeURIComponent(state.lane)}/transcript?limit=200&before=${t.first}`);
  if (page.epoch !== t.epoch) return loadTranscript();
  const list = $('transcript');
  const h = list.scrollHeight;
  list.prepend(...page.events.map(eventItem).filter(Boolean));
  list.scrollTop += list.scrollHeight - h;
  if (page.events.length) t.first = page.events[0].line;
  $('older').hidden = !page.more || !page.events.length;
}

function eventItem(ev) {
  const when = ev.timestamp ? new Date(ev.timestamp / 1000).toLocaleTimeString() : '';
  const head = (label, cls) => el('span', { class: `who ${cls || ''}` }, label);
  const li = (cls, ...kids) => el('li', { class: `ev ${cls}`, 'data-line': ev.line, title: `line ${ev.line} ${when}` }, ...kids);
  const text = (t) => el('div', { class: 'text' }, t);
  switch (ev.type) {
    case 'user_prompt': return li('user', head('operator'), text(ev.text));
    case 'assistant_text': return li('assistant', head('agent'), text(ev.text));
    case 'tool_call':
      return li('call', head(ev.name), el('code', { class: 'cmd' }, ev.command != null ? `$ ${ev.command}` : ev.input));
    case 'tool_result': {
      const status = ev.failed ? `failed${ev.exit_code != null ? ` (exit ${ev.exit_code})` : ''}` : 'ok';
      return li(ev.failed ? 'result failed' : 'result', head(status, ev.failed ? 'fail' : ''), el('pre', {}, ev.output));
    }
    case 'file_change': return li('change', head(ev.change.kind), el('code', {}, ev.path));
    case 'commit': return li('commit', head('commit'), el('code', {}, `${ev.sha || ''} ${ev.message || ''}`));
    case 'turn_end': return li('turn', el('span', { class: 'muted' }, '— turn ended, waiting for input —'));
    case 'compaction': return li('turn', el('span', { class: 'muted' }, '— context compacted —'));
    case 'injected_context': return li('injected', head('context', 'muted'), text(String(ev.text).slice(0, 400)));
    case 'compaction_summary': return li('injected', head('summary', 'muted'), text(String(ev.text).slice(0, 400)));
    case 'subagent_link': return li('turn', head('subagent'), text(ev.description || ev.agent_id));
    default: return null; // reasoning, token usage, session meta: not shown
  }
}

async function refreshInbox() {
  const lane = state.lane;
  if (!lane) return;
  let doc;
  try {
    doc = await api(`/api/lanes/${encodeURIComponent(lane)}/inbox?all=true`);
  } catch (e) {
    $('inbox').replaceChildren(el('li', { class: 'muted' }, e.message));
    return;
  }
  if (lane !== state.lane) return;
  const items = doc.items.slice().reverse();
  $('inbox').replaceChildren(...items.map((i) => el('li', { class: `item ${i.state}`, 'data-key': i.key },
    el('div', { class: 'meta' },
      el('code', {}, i.key), ' ',
      el('span', { class: `badge it-${i.state}` }, i.state), ' ',
      el('span', { class: 'small muted', title: `created ${localTime(i.created)}, expires ${localTime(i.expires)}` },
        `${i.target_kind} ${i.target} · sent ${localTime(i.created)} · `, rel(i.created, 'ago'),
        i.shown ? ` · shown ${i.shown}×` : '', i.last_shown ? ` (last ${localTime(i.last_shown)})` : '')),
    el('div', { class: 'text' }, i.text),
    i.reply ? el('div', { class: `reply ${i.reply.polarity}` },
      el('span', { class: 'who' }, i.reply.polarity === 'nack' ? 'refused:' : 'acked:'), ' ', i.reply.body,
      el('span', { class: 'small muted' }, ` (${localTime(i.reply.at)})`)) : null,
    i.problem ? el('div', { class: 'err small' }, i.problem) : null)));
  if (doc.omitted) $('inbox').append(el('li', { class: 'muted small' }, `${doc.omitted} older item(s) not shown`));
}

async function steer(ev) {
  ev.preventDefault();
  const box = $('steer-text');
  const text = box.value.trim();
  const msg = $('steer-msg');
  if (!text || !state.lane) return;
  $('steer-send').disabled = true;
  const r = await post('/api/steer', { target: `lane:${state.lane}`, text });
  $('steer-send').disabled = false;
  if (r.ok) {
    box.value = '';
    msg.className = 'ok';
    msg.textContent = `sent ${r.body.key}`;
    refreshInbox();
  } else {
    msg.className = 'err';
    msg.textContent = clean(r.body.error);
  }
}

// The review of what an agent changed: review.js.

// ---- tasks, ledger, graph ---------------------------------------------------------

async function refreshTasks() {
  const q = new URLSearchParams({ category: state.cat, limit: String(state.taskLimit) });
  if (state.q) q.set('q', state.q);
  const doc = await api(`/api/tasks?${q}`);
  for (const b of document.querySelectorAll('#task-tabs button')) {
    b.querySelector('span').textContent = `(${doc.counts[b.dataset.cat]})`;
    b.classList.toggle('on', b.dataset.cat === state.cat);
  }
  const handles = (xs) => xs.length > 4 ? `${xs.slice(0, 4).join(' ')} +${xs.length - 4}` : xs.join(' ');
  $('tasks').tBodies[0].replaceChildren(...doc.tasks.map((t) => el('tr', { 'data-task': t.id, onclick: () => showLedger(t.id) },
    el('td', {}, t.rank != null ? String(t.rank) : ''),
    el('td', {}, el('code', {}, t.handle)),
    el('td', {}, t.description, t.claim && t.claim.stale ? el('span', { class: 'badge stale' }, 'stale claim') : null),
    el('td', {}, t.phase),
    el('td', {}, t.priority || '–'),
    el('td', { title: 'inherited priority' }, t.inherited_priority || '–'),
    el('td', {}, String(t.releases)),
    el('td', { class: 'small mono' }, handles(t.unblocks)),
    el('td', { class: 'small mono' }, handles(t.waits_on)))));
  $('tasks-more').hidden = doc.total <= doc.tasks.length;
}

async function showLedger(id) {
  state.ledger = id;
  const doc = await api(`/api/tasks/${encodeURIComponent(id)}/ledger`);
  $('ledger-section').hidden = false;
  $('ledger-task').textContent = clean(`${doc.task.handle} ${doc.task.description}`);
  $('ledger').tBodies[0].replaceChildren(...doc.ledger.map((e) => el('tr', {},
    el('td', { class: 'small' }, localTime(e.at)),
    el('td', {}, e.kind),
    el('td', { class: 'mono small' }, e.actor || ''),
    el('td', {}, e.fence != null ? String(e.fence) : ''),
    el('td', { class: 'mono small' }, e.detail && Object.keys(e.detail).length ? JSON.stringify(e.detail) : ''))));
}

async function refreshGraph() {
  const g = await api('/api/graph?limit=60');
  const W = 200, H = 34, BW = 176, BH = 24;
  const cols = Math.max(1, ...g.nodes.map((n) => n.x + 1));
  const rows = Math.max(1, ...g.nodes.map((n) => n.y + 1));
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('width', String(cols * W + 20));
  svg.setAttribute('height', String(rows * H + 20));
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'dependency graph: prerequisites left of the tasks that wait on them');
  const at = new Map(g.nodes.map((n) => [n.id, n]));
  const mk = (tag, attrs) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  };
  for (const e of g.edges) {
    const a = at.get(e.from), b = at.get(e.to);
    const x1 = 10 + a.x * W + BW, y1 = 10 + a.y * H + BH / 2, x2 = 10 + b.x * W, y2 = 10 + b.y * H + BH / 2;
    svg.append(mk('path', { d: `M${x1},${y1} C${x1 + 20},${y1} ${x2 - 20},${y2} ${x2},${y2}`, class: 'edge' }));
  }
  for (const n of g.nodes) {
    const grp = mk('g', { class: `node ${n.category}${n.stale ? ' stale' : ''}`, 'data-task': n.id, transform: `translate(${10 + n.x * W},${10 + n.y * H})` });
    grp.append(mk('rect', { width: BW, height: BH, rx: 4 }));
    const t = mk('text', { x: 6, y: 16 });
    const label = `${n.inherited_priority || '·'} ${n.description}`;
    t.textContent = clean(label.length > 26 ? `${label.slice(0, 25)}…` : label);
    const tip = mk('title', {});
    tip.textContent = clean(`${n.handle} ${n.description} (${n.category}, releases ${n.releases})`);
    grp.append(t, tip);
    grp.addEventListener('click', () => showLedger(n.id));
    svg.append(grp);
  }
  $('graph-box').replaceChildren(svg);
  $('graph-note').textContent = `${g.shown} of ${g.open} open tasks, most pressing first`;
}

// ---- live updates --------------------------------------------------------------------

let pending = null;
// Changes come in bursts: one refresh 30 ms after the first (at once on loading), the
// status, the inbox, and (at most every 2 s) the tasks and the graph fetched together.
function refreshSoon(delay = 30) {
  if (pending) return;
  pending = setTimeout(async () => {
    pending = null;
    try {
      const due = Date.now() >= state.tasksDue;
      if (due) state.tasksDue = Date.now() + 2000;
      await Promise.all([refreshStatus(), state.lane ? refreshInbox() : null,
        due ? Promise.all([refreshTasks(), refreshGraph()]) : null]);
      if (due) {
        if (state.ledger) await showLedger(state.ledger);
        // A comment being written is not swept away by a refresh.
        if (state.review && !state.review.sel) await refreshReview();
      } else {
        setTimeout(refreshSoon, state.tasksDue - Date.now());
      }
    } catch (e) {
      $('conn').textContent = `error: ${clean(e.message)}`;
    }
  }, delay);
}

function connect() {
  const es = new EventSource('/api/live');
  es.addEventListener('open', () => { $('conn').textContent = 'live'; $('conn').className = 'conn on'; });
  es.addEventListener('change', (m) => { document.body.dataset.generation = m.data; refreshSoon(); });
  es.addEventListener('error', () => { $('conn').textContent = 'reconnecting…'; $('conn').className = 'conn off'; });
}

let voice = false;
function speak(text) {
  if (!voice || !window.speechSynthesis) return;
  window.speechSynthesis.speak(new SpeechSynthesisUtterance(String(text).slice(0, 400)));
}

document.addEventListener('DOMContentLoaded', () => {
  $('steer-form').addEventListener('submit', steer);
  setupNotify();
  $('older').addEventListener('click', olderEvents);
  $('speak').addEventListener('change', (e) => {
    voice = e.target.checked;
    if (!voice && window.speechSynthesis) window.speechSynthesis.cancel();
  });
  for (const b of document.querySelectorAll('#task-tabs button')) {
    b.addEventListener('click', () => { state.cat = b.dataset.cat; state.taskLimit = 100; refreshTasks(); });
  }
  let typing = null;
  $('task-q').addEventListener('input', (e) => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = e.target.value.trim(); refreshTasks(); }, 200);
  });
  $('tasks-more').addEventListener('click', () => { state.taskLimit += 100; refreshTasks(); });
  setInterval(tick, 1000);
  connect();
  refreshSoon(0);
});
