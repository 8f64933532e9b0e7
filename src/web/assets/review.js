'use strict';
// The review of what a task's agent changed (`/api/tasks/ID/review`): its commits, its
// files, and its diff, unified or side by side (the operator's choice, kept in this
// browser), the code coloured by highlight.js (vendored, loaded on first use). Selecting
// new lines by their numbers and commenting makes a steering item anchored to them,
// shown at those lines with its state and the agent's answer.
//
// Large diffs stay quick: a file's rows are cut into blocks, and a block is drawn (and
// coloured) only when it nears the viewport (an IntersectionObserver); until then it is
// an empty box of about its height. A redraw (a new selection, a comment) draws again
// only the blocks that were drawn, so the page does not jump.
//
// Agent text never becomes HTML: highlight.js's output is parsed inert (DOMParser runs
// no script and loads nothing) and rebuilt from its text and its spans' class names only.
// Uses app.js's helpers ($, el, clean, api, post, span, now, state).

state.review = null; // {task, doc, key, sel: {path, start, end} | null, blocks}

const REVIEW_BLOCK = 150;      // rows drawn together
const REVIEW_ROW_PX = 17;      // a row's height before it is drawn
const COLOUR_MAX = 400000;     // characters of a file past which it is not coloured
const colours = new WeakMap(); // a hunk's line → {old, new}: its tokens on each side

function reviewView() {
  let v = null;
  try { v = localStorage.getItem('spice.review.view'); } catch (_) { /* storage refused */ }
  if (v === 'unified' || v === 'split') return v;
  return window.innerWidth >= 900 ? 'split' : 'unified';
}

function setReviewView(v) {
  try { localStorage.setItem('spice.review.view', v); } catch (_) { /* storage refused */ }
  if (state.review && state.review.doc) renderReview();
  else showViewChoice();
}

function showViewChoice() {
  const v = reviewView();
  $('review-unified').setAttribute('aria-pressed', String(v === 'unified'));
  $('review-split').setAttribute('aria-pressed', String(v === 'split'));
}

let highlightLoaded = null;
// highlight.js and its theme from this origin, once; `null` when they cannot load
// (the diff is then drawn plain).
function loadHighlight() {
  if (highlightLoaded) return highlightLoaded;
  highlightLoaded = new Promise((done) => {
    const css = document.createElement('link');
    css.rel = 'stylesheet';
    css.href = '/vendor/highlight.css';
    document.head.append(css);
    const s = document.createElement('script');
    s.src = '/vendor/highlight.js';
    s.onload = () => done(window.hljs || null);
    s.onerror = () => done(null);
    document.head.append(s);
  });
  return highlightLoaded;
}

async function openReview(id) {
  state.review = { task: id, doc: null, key: null, sel: null, blocks: [] };
  $('review-section').hidden = false;
  await loadHighlight();
  await refreshReview();
  $('review-section').scrollIntoView({ block: 'start' });
}

async function refreshReview() {
  const r = state.review;
  if (!r) return;
  let doc;
  try {
    doc = await api(`/api/tasks/${encodeURIComponent(r.task)}/review`);
  } catch (e) {
    $('review-problem').hidden = false;
    $('review-problem').textContent = clean(e.message);
    return;
  }
  $('review-problem').hidden = true;
  // The periodic refresh redraws nothing when nothing changed.
  const key = JSON.stringify({ ...doc, now: null });
  if (key === r.key) return;
  r.key = key;
  r.doc = doc;
  renderReview();
}

// The language highlight.js knows a path by (its extension, or its name), or null.
function languageOf(path) {
  const hljs = window.hljs;
  if (!hljs) return null;
  const name = path.split('/').pop();
  const byName = { Makefile: 'makefile', 'Cargo.lock': 'toml', Gemfile: 'ruby' }[name];
  const lang = byName || (name.includes('.') ? name.split('.').pop().toLowerCase() : null);
  return lang && hljs.getLanguage(lang) ? lang : null;
}

// `text`'s lines as tokens ({t: text, c: [class names, outermost first]}), coloured
// by highlight.js as one piece so a string or comment spanning lines stays coloured;
// null when it cannot say (the caller draws the lines plain).
function highlightLines(text, lang) {
  let html;
  try {
    html = window.hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
  } catch (_) {
    return null;
  }
  const root = new DOMParser().parseFromString(`<div>${html}</div>`, 'text/html').body.firstChild;
  if (!root) return null;
  const lines = [[]];
  const walk = (node, classes) => {
    for (const n of node.childNodes) {
      if (n.nodeType === Node.TEXT_NODE) {
        n.data.split('\n').forEach((part, i) => {
          if (i) lines.push([]);
          if (part) lines[lines.length - 1].push({ t: part, c: classes });
        });
      } else if (n.nodeType === Node.ELEMENT_NODE && n.tagName === 'SPAN') {
        const own = String(n.getAttribute('class') || '').split(/\s+/)
          .filter((c) => /^(hljs-[a-z0-9-]+|[a-z]+_+)$/.test(c)).join(' ');
        walk(n, own ? classes.concat([own]) : classes);
      }
    }
  };
  walk(root, []);
  return lines;
}

// Colours a hunk's old and new sides, once, when its first row is drawn.
function colourHunk(h, lang) {
  if (!lang || colours.has(h.lines[0])) return;
  for (const [side, skip] of [['old', '+'], ['new', '-']]) {
    const lines = h.lines.filter((l) => l.kind !== skip);
    if (!lines.length) continue;
    const toks = highlightLines(lines.map((l) => l.text).join('\n'), lang);
    if (!toks || toks.length !== lines.length) continue;
    lines.forEach((l, i) => {
      const c = colours.get(l) || {};
      c[side] = toks[i];
      colours.set(l, c);
    });
  }
  if (!colours.has(h.lines[0])) colours.set(h.lines[0], {});
}

function codeCell(l, side, cls, sign) {
  const td = el('td', { class: `code ${cls}` });
  if (!l) return td;
  if (sign) td.append(document.createTextNode(l.kind));
  const toks = (colours.get(l) || {})[side];
  if (!toks) {
    td.append(document.createTextNode(clean(l.text)));
    return td;
  }
  for (const tk of toks) {
    let node = document.createTextNode(clean(tk.t));
    for (let i = tk.c.length - 1; i >= 0; i--) {
      const s = document.createElement('span');
      s.className = tk.c[i];
      s.append(node);
      node = s;
    }
    td.append(node);
  }
  return td;
}

// A file's rows: a hunk's header, then its lines (unified), or its lines paired
// (side by side: a run of removed lines beside the run of added lines after it).
function fileRows(f, view) {
  const rows = [];
  for (const h of f.hunks) {
    rows.push({ h, header: true });
    if (view === 'unified') {
      for (const l of h.lines) rows.push({ h, left: l.kind === '+' ? null : l, right: l.kind === '-' ? null : l, l });
      continue;
    }
    let dels = [];
    let adds = [];
    const flush = () => {
      for (let i = 0; i < Math.max(dels.length, adds.length); i++) rows.push({ h, left: dels[i] || null, right: adds[i] || null });
      dels = [];
      adds = [];
    };
    for (const l of h.lines) {
      if (l.kind === '-') {
        if (adds.length) flush();
        dels.push(l);
      } else if (l.kind === '+') {
        adds.push(l);
      } else {
        flush();
        rows.push({ h, left: l, right: l });
      }
    }
    flush();
  }
  return rows;
}

// A file's diff: its header, then its blocks, drawn as they scroll near.
function renderReview() {
  const r = state.review;
  const { doc } = r;
  const view = reviewView();
  showViewChoice();
  $('review-task').textContent = clean(`${doc.task.handle} ${doc.task.title}`);
  const against = doc.merged
    ? `merged into ${doc.merged.base} at ${String(doc.merged.commit).slice(0, 10)} (phase ${doc.merged.phase}, ${span(new Date(doc.merged.at).getTime() - now())} ago)`
    : `against ${doc.base}`;
  const edited = (doc.uncommitted || []).length ? `; ${doc.uncommitted.length} file(s) edited, not committed` : '';
  $('review-base').textContent = clean(`${doc.files.length} file(s), +${doc.added} -${doc.removed} ${against}${doc.truncated ? ' (cut: too large)' : ''}${edited}`);
  const verdict = {
    passed: el('span', { class: 'badge it-acked', title: 'the pre-commit gate passed this commit' }, 'gate passed'),
    unverified: el('span', { class: 'badge it-refused', title: 'committed with --no-verify, or rewritten: the phase gate will say so' }, 'not through the gate'),
  };
  $('review-commits').replaceChildren(...doc.commits.map((c) => el('li', { 'data-gate': c.gate || '' },
    el('code', {}, c.sha.slice(0, 10)), ' ', c.subject, ' ', el('span', { class: 'muted' }, c.author),
    verdict[c.gate] ? ' ' : null, verdict[c.gate] ? verdict[c.gate].cloneNode(true) : null)));
  $('review-files').replaceChildren(...doc.files.map((f) => el('li', {},
    el('a', { href: `#diff-${encodeURIComponent(f.path)}` }, f.path), ` ${f.status} +${f.added} -${f.removed}${f.binary ? ' (binary)' : ''}`)));
  const wasDrawn = new Set(r.blocks.filter((b) => b.drawn).map((b) => b.id));
  if (r.observer) r.observer.disconnect();
  r.observer = new IntersectionObserver((seen) => {
    for (const e of seen) {
      if (!e.isIntersecting) continue;
      const b = r.blocks.find((x) => x.node === e.target);
      if (b && !b.drawn) drawBlock(b);
    }
  }, { rootMargin: '800px 0px' });
  r.blocks = [];
  const byEnd = {};
  for (const c of doc.comments) (byEnd[`${c.path}\n${c.end}`] = byEnd[`${c.path}\n${c.end}`] || []).push(c);
  const fileDiv = (f, where) => {
    const div = el('div', { class: 'file', id: `${where}-${encodeURIComponent(f.path)}`, 'data-path': f.path },
      el('h3', { class: 'mono' }, f.old_path ? `${f.old_path} → ${f.path}` : f.path));
    if (f.binary) {
      div.append(el('p', { class: 'muted small' }, 'binary file'));
      return div;
    }
    const size = f.hunks.reduce((n, h) => n + h.lines.reduce((m, l) => m + l.text.length + 1, 0), 0);
    const lang = size <= COLOUR_MAX ? languageOf(f.path) : null;
    const rows = fileRows(f, view);
    for (let i = 0; i < rows.length; i += REVIEW_BLOCK) {
      const b = { id: `${where}\n${f.path}\n${i}`, f, lang, view, byEnd, rows: rows.slice(i, i + REVIEW_BLOCK), drawn: false };
      b.node = el('div', { class: 'block waiting' });
      b.node.style.height = `${b.rows.length * REVIEW_ROW_PX}px`;
      r.blocks.push(b);
      div.append(b.node);
    }
    return div;
  };
  const parts = doc.files.map((f) => fileDiv(f, 'diff'));
  const loose = doc.uncommitted || [];
  if (loose.length) {
    parts.push(el('h3', { class: 'uncommitted' }, `Not committed yet (${loose.length} file(s))${doc.uncommitted_truncated ? ' (cut: too large)' : ''}`));
    parts.push(...loose.map((f) => {
      const d = fileDiv(f, 'loose');
      d.classList.add('uncommitted');
      return d;
    }));
  }
  $('review-diff').replaceChildren(...parts);
  for (const b of r.blocks) {
    if (wasDrawn.has(b.id)) drawBlock(b);
    else r.observer.observe(b.node);
  }
}

function drawBlock(b) {
  const { sel } = state.review;
  const split = b.view === 'split';
  const cols = split ? ['ln', 'code', 'ln', 'code'] : ['ln', 'ln', 'code'];
  const width = cols.length;
  const trs = [];
  for (const row of b.rows) {
    if (row.header) {
      const h = row.h;
      trs.push(el('tr', { class: 'hunk' }, el('td', { colspan: width, class: 'mono small muted' }, `@@ -${h.old_start},${h.old_lines} +${h.new_start},${h.new_lines} @@ ${h.section}`)));
      continue;
    }
    colourHunk(row.h, b.lang);
    const n = row.right ? row.right.new : null;
    const chosen = sel && sel.path === b.f.path && n != null && n >= sel.start && n <= sel.end;
    const num = n != null
      ? el('td', { class: 'ln pick', 'data-line': n, title: 'select to comment', onclick: (ev) => pickLine(b.f.path, n, ev.shiftKey) }, String(n))
      : el('td', { class: 'ln' }, '');
    const old = el('td', { class: 'ln' }, row.left ? String(row.left.old) : '');
    const kind = row.right && row.right.kind === '+' ? 'add' : row.left && row.left.kind === '-' ? 'del' : 'ctx';
    const cells = split
      ? [old, codeCell(row.left, 'old', row.left ? (row.left.kind === '-' ? 'del' : '') : 'none', false),
        num, codeCell(row.right, 'new', row.right ? (row.right.kind === '+' ? 'add' : '') : 'none', false)]
      : [old, num, codeCell(row.l, row.l.kind === '-' ? 'old' : 'new', '', true)];
    trs.push(el('tr', { class: `dl k${kind}${chosen ? ' chosen' : ''}`, 'data-new': n == null ? '' : n }, ...cells));
    if (n != null) {
      for (const c of b.byEnd[`${b.f.path}\n${n}`] || []) trs.push(commentRow(c, width));
      if (chosen && n === sel.end) trs.push(commentForm(b.f.path, width));
    }
  }
  const colgroup = el('colgroup', {}, ...cols.map((c) => el('col', { class: `c-${c}` })));
  b.node.replaceChildren(el('table', { class: `diff ${b.view}` }, colgroup, el('tbody', {}, ...trs)));
  b.node.classList.remove('waiting');
  b.node.style.height = '';
  b.drawn = true;
  if (state.review.observer) state.review.observer.unobserve(b.node);
  const box = b.node.querySelector('tr.comment-form textarea');
  if (box) box.focus({ preventScroll: true });
}

function commentRow(c, width) {
  const badge = { pending: 'it-pending', acked: 'it-acked', refused: 'it-refused', expired: 'it-expired' }[c.state] || '';
  return el('tr', { class: 'comment', 'data-key': c.key },
    el('td', { colspan: width },
      el('span', { class: `badge ${badge}` }, c.state), ' ',
      c.outdated ? el('span', { class: 'badge it-expired', title: 'the lines changed since the comment' }, 'outdated') : null, ' ',
      el('code', { class: 'small' }, `${c.path}:${c.start}-${c.end}`), ' ',
      el('span', { class: 'text' }, c.comment),
      c.answer ? el('div', { class: `reply${c.answer.polarity === 'nack' ? ' nack' : ''}` },
        el('span', { class: 'who' }, c.answer.polarity.toUpperCase()), c.answer.body) : null));
}

// A new selection redraws only the blocks of the old and the new one.
function pickLine(path, n, extend) {
  const r = state.review;
  const before = r.sel;
  if (extend && r.sel && r.sel.path === path) {
    r.sel = { path, start: Math.min(r.sel.start, n), end: Math.max(r.sel.end, n) };
  } else {
    r.sel = { path, start: n, end: n };
  }
  redrawSelected(before);
}

function redrawSelected(before) {
  const r = state.review;
  const touches = (b, s) => s && b.f.path === s.path && b.rows.some((row) => row.right && row.right.new >= s.start && row.right.new <= s.end);
  for (const b of r.blocks) if (b.drawn && (touches(b, before) || touches(b, r.sel))) drawBlock(b);
}

function commentForm(path, width) {
  const { sel, doc } = state.review;
  const box = el('textarea', { rows: 3, maxlength: 60000, 'aria-label': 'review comment', placeholder: `what should change at ${path}:${sel.start}-${sel.end}` });
  const msg = el('span', { role: 'status', class: 'small' });
  const send = async (ev) => {
    ev.preventDefault();
    const text = box.value.trim();
    if (!text || !doc.lane) return;
    const r = await post('/api/steer', { target: `lane:${doc.lane}`, text, at: `${sel.path}:${sel.start}-${sel.end}` });
    if (r.ok) { state.review.sel = null; await refreshReview(); } else { msg.className = 'err small'; msg.textContent = clean(r.body.error); }
  };
  const cancel = () => {
    const before = state.review.sel;
    state.review.sel = null;
    redrawSelected(before);
  };
  return el('tr', { class: 'comment-form' }, el('td', { colspan: width },
    el('form', { class: 'reply-form', onsubmit: send }, box, el('button', { type: 'submit' }, 'Comment'),
      el('button', { type: 'button', onclick: cancel }, 'cancel'), msg)));
}

$('review-unified').addEventListener('click', () => setReviewView('unified'));
$('review-split').addEventListener('click', () => setReviewView('split'));
$('review-close').addEventListener('click', () => {
  if (state.review && state.review.observer) state.review.observer.disconnect();
  state.review = null;
  $('review-section').hidden = true;
  $('review-diff').replaceChildren();
});
