// The sluice console: polls /api/v1/pipelines, draws throughput and lag from the samples it has
// seen since the page loaded, and operates pipelines (pause, resume, restart, snapshot, the
// dead-letter queue, reload) through the same API the CLI uses. Plain browser JavaScript, no
// libraries. Query parameters: ?interval=MS (poll period, default 1000), ?pipeline=ID (opened).
'use strict';

const HISTORY = 300;  // samples kept per pipeline (5 minutes at the default period)

const state = {
  token: sessionStorage.getItem('sluice.token') || '',
  selected: null,
  history: new Map(),  // id → [{t, rate, lag}]
  errors: new Map(),   // id → [{t, text}] distinct errors seen, newest first
  detail: null,        // GET /api/v1/pipelines/{id} of the selected pipeline
  detailAt: 0,
  dlqAt: 0,
  interval: 1000,
  busy: false,
};

const params = new URLSearchParams(location.search);
if (params.get('interval')) state.interval = Math.max(100, Number(params.get('interval')) || 1000);
if (params.get('pipeline')) state.selected = params.get('pipeline');

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else if (k === 'style') e.style.cssText = v;  // CSSOM: the page's CSP allows no style attributes
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (state.token) headers['Authorization'] = 'Bearer ' + state.token;
  const init = { method, headers };
  if (method !== 'GET') {
    init.body = body === undefined ? '' : JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const res = await fetch(path, init);
  const text = await res.text();
  if (res.status === 401) {
    $('#login').hidden = false;
    throw new ApiError(401, 'the API asks for a token (http.token)');
  }
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (e) {
    json = null;
  }
  if (!res.ok) throw new ApiError(res.status, (json && json.error) || text || res.statusText);
  return json;
}

function fmtInt(v) {
  return v === null || v === undefined ? '–' : Number(v).toLocaleString('en-US');
}
function fmtNum(v, digits) {
  if (v === null || v === undefined || !isFinite(v)) return '–';
  return Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}
function fmtLag(v) {
  if (v === null || v === undefined) return '–';
  if (v < 1) return fmtNum(v * 1000, 0) + ' ms';
  if (v < 120) return fmtNum(v, 1) + ' s';
  return fmtNum(v / 60, 1) + ' min';
}

function notice(text, kind) {
  const n = $('#notice');
  n.textContent = text;
  n.dataset.kind = kind || 'error';
  n.hidden = !text;
}

function setConn(ok, text) {
  const c = $('#conn');
  c.dataset.state = ok ? 'ok' : 'error';
  c.textContent = text;
}

// ── the pipeline list ──────────────────────────────────────────────────────

function snapshotCell(s) {
  if (!s || !s.phase) return '–';
  if (s.phase !== 'snapshot') return s.phase;
  const done = s.rows_done || 0;
  const total = s.rows_total || 0;
  const pct = total > 0 ? Math.min(100, (100 * done) / total) : 0;
  return el('span', { class: 'snap', 'data-done': done, 'data-total': total },
            el('span', { class: 'bar' }, el('span', { style: `width:${pct.toFixed(1)}%` })),
            ` ${fmtInt(done)} / ${total > 0 ? '~' + fmtInt(total) : '?'}`);
}

async function control(id, verb) {
  try {
    const r = await api('POST', `/api/v1/pipelines/${encodeURIComponent(id)}/${verb}`);
    let text = `${id}: ${verb} done (now ${r.state})`;
    if (verb === 'pause' && r.source_retains) text += `; the source retains ${r.source_retains}`;
    notice(text, 'ok');
  } catch (e) {
    notice(`${id}: ${verb} failed: ${e.message}`);
  }
  state.detailAt = 0;
  await poll();
}

// Rows are updated in place (a button under the pointer is never swapped for a copy between a
// press and its release); a row's buttons are rebuilt only when its state changes.
const rows = new Map();  // id → {tr, cells, state}

function setCell(td, value, text) {
  const v = value === null || value === undefined ? '' : String(value);
  if (td.dataset.value !== v) td.dataset.value = v;
  if (td.textContent !== text) td.textContent = text;
}

function buttonsFor(p) {
  const running = p.state === 'running' || p.state === 'starting';
  return [
    running ? el('button', { class: 'pause', onclick: () => control(p.id, 'pause') }, 'Pause')
      : p.state === 'paused'
        ? el('button', { class: 'resume', onclick: () => control(p.id, 'resume') }, 'Resume')
        : null,
    ' ',
    el('button', { class: 'restart', onclick: () => control(p.id, 'restart') }, 'Restart'),
  ].filter((x) => x !== null);
}

function renderList(pipelines) {
  const body = $('#pipelines tbody');
  $('#empty').hidden = pipelines.length > 0;
  const seen = new Set();
  for (const p of pipelines) {
    seen.add(p.id);
    let r = rows.get(p.id);
    if (!r) {
      const cells = {};
      for (const c of ['id', 'state', 'flow', 'read', 'written', 'rate', 'lag', 'spool', 'dead', 'snapshot', 'buttons'])
        cells[c] = el('td', { class: c === 'state' ? 'state-cell' : c });
      for (const c of ['read', 'written', 'rate', 'lag', 'spool', 'dead']) cells[c].classList.add('num');
      cells.id.textContent = p.id;
      cells.state.append(el('span', { class: 'state' }));
      cells.buttons.addEventListener('click', (e) => e.stopPropagation());
      const tr = el('tr', { class: 'pipeline', 'data-pipeline': p.id, onclick: () => select(p.id) },
                    ...Object.values(cells));
      r = { tr, cells, state: null };
      rows.set(p.id, r);
    }
    body.append(r.tr);  // keeps the API's order (a no-op when already in place)
    r.tr.classList.toggle('selected', p.id === state.selected);
    const badge = r.cells.state.firstChild;
    badge.dataset.state = p.state;
    badge.textContent = p.state;
    r.cells.flow.textContent = `${p.source} → ${p.destination}`;
    setCell(r.cells.read, p.records.read, fmtInt(p.records.read));
    setCell(r.cells.written, p.records.written, fmtInt(p.records.written));
    setCell(r.cells.rate, p.records_per_second, fmtNum(p.records_per_second, 1));
    setCell(r.cells.lag, p.lag_seconds, fmtLag(p.lag_seconds));
    setCell(r.cells.spool, p.spool_records, fmtInt(p.spool_records));
    setCell(r.cells.dead, p.records.dead_lettered, fmtInt(p.records.dead_lettered));
    r.cells.snapshot.replaceChildren(snapshotCell(p.snapshot));
    if (r.state !== p.state) {
      r.cells.buttons.replaceChildren(...buttonsFor(p));
      r.state = p.state;
    }
  }
  for (const [id, r] of rows) {
    if (!seen.has(id)) {
      r.tr.remove();
      rows.delete(id);
    }
  }
}

function record(p) {
  const now = Date.now();
  let h = state.history.get(p.id);
  if (!h) state.history.set(p.id, (h = []));
  h.push({ t: now, rate: p.records_per_second, lag: p.lag_seconds });
  if (h.length > HISTORY) h.splice(0, h.length - HISTORY);
  const err = p.errors.error || p.errors.last_error;
  if (err) {
    let list = state.errors.get(p.id);
    if (!list) state.errors.set(p.id, (list = []));
    if (!list.length || list[0].text !== err) list.unshift({ t: now, text: err });
    if (list.length > 20) list.length = 20;
  }
}

// ── charts (SVG polylines over the samples seen) ───────────────────────────

function drawChart(svg, samples, key) {
  const W = 600, H = 140, PAD = 14;
  const pts = samples.filter((s) => s[key] !== null && s[key] !== undefined && isFinite(s[key]));
  svg.replaceChildren();
  const ns = 'http://www.w3.org/2000/svg';
  const text = (x, y, t) => {
    const e = document.createElementNS(ns, 'text');
    e.setAttribute('x', x);
    e.setAttribute('y', y);
    e.textContent = t;
    svg.append(e);
  };
  if (pts.length < 2) {
    text(8, 20, pts.length ? 'collecting samples…' : 'no data');
    return;
  }
  const t0 = pts[0].t, t1 = pts[pts.length - 1].t;
  const max = Math.max(...pts.map((s) => s[key])) || 1;
  const poly = document.createElementNS(ns, 'polyline');
  poly.setAttribute('points', pts.map((s) => {
    const x = ((s.t - t0) / Math.max(1, t1 - t0)) * W;
    const y = H - PAD - (s[key] / (max * 1.1)) * (H - 2 * PAD);
    return `${x.toFixed(1)},${y.toFixed(1)}`;
  }).join(' '));
  svg.append(poly);
  text(4, 12, `max ${fmtNum(max, 2)}`);
  text(4, H - 3, `${Math.round((t1 - t0) / 1000)} s`);
}

// ── the selected pipeline ──────────────────────────────────────────────────

function select(id) {
  state.selected = id;
  state.detail = null;
  state.detailAt = 0;
  state.dlqAt = 0;
  const u = new URL(location.href);
  u.searchParams.set('pipeline', id);
  history.replaceState(null, '', u);
  poll();
}

function dl(target, pairs) {
  target.replaceChildren();
  for (const [k, v, cls] of pairs) {
    target.append(el('dt', {}, k), el('dd', { class: cls || null }, v === null || v === undefined ? '–' : v));
  }
}

function renderDetail(p) {
  const d = $('#detail');
  if (!p) {
    d.hidden = true;
    return;
  }
  d.hidden = false;
  d.dataset.pipeline = p.id;
  $('#d-id').textContent = p.id;
  const st = $('#d-state');
  st.textContent = p.state;
  st.dataset.state = p.state;
  $('#d-rate').textContent = fmtNum(p.records_per_second, 1);
  $('#d-lag').textContent = fmtLag(p.lag_seconds);
  const h = state.history.get(p.id) || [];
  drawChart($('#chart-rate'), h, 'rate');
  drawChart($('#chart-lag'), h, 'lag');
  dl($('#d-positions'), [
    ['read', p.positions.read, 'pos-read'],
    ['written', p.positions.written, 'pos-written'],
    ['checkpointed', p.positions.checkpointed, 'pos-checkpointed'],
  ]);
  dl($('#d-records'), [
    ['read', fmtInt(p.records.read)],
    ['written', fmtInt(p.records.written)],
    ['filtered', fmtInt(p.records.filtered)],
    ['dead-lettered', fmtInt(p.records.dead_lettered)],
    ['in flight', fmtInt(p.records.in_flight)],
    ['spooled, not yet written', fmtInt(p.spool_records)],
    ['runs', fmtInt(p.runs)],
  ]);
  const snap = $('#d-snapshot');
  snap.replaceChildren(p.snapshot && p.snapshot.phase
    ? el('div', {}, `phase: ${p.snapshot.phase} `, p.snapshot.phase === 'snapshot' ? snapshotCell(p.snapshot)
      : `(${fmtInt(p.snapshot.rows_done)} rows snapshotted)`)
    : el('div', {}, 'this source reports no snapshot'));
  const tables = (p.snapshot && p.snapshot.tables) || [];
  if (tables.length) {
    snap.append(el('table', { class: 'snapshot-tables' },
      el('thead', {}, el('tr', {}, el('th', {}, 'table'), el('th', { class: 'num' }, 'snapshot rows read'))),
      el('tbody', {}, ...tables.map((t) => el('tr', { 'data-table': t.table },
        el('td', {}, t.table), el('td', { class: 'num', 'data-value': t.rows }, fmtInt(t.rows)))))));
  }
  dl($('#d-errors'), [
    ['error', p.errors.error, 'error'],
    ['last error', p.errors.last_error, 'last-error'],
    ['failed writes', fmtInt(p.errors.write_errors)],
    ['write retries', fmtInt(p.errors.write_retries)],
  ]);
  const stalls = $('#d-stalls');
  stalls.replaceChildren();
  for (const s of p.stalls || [])
    stalls.append(el('li', { class: 'stall' }, `${s.side} stalled for ${fmtNum(s.seconds, 0)} s: ${s.pending}`));
  for (const e of (state.errors.get(p.id) || []).slice(1, 6))
    stalls.append(el('li', { class: 'past-error' }, `${new Date(e.t).toLocaleTimeString()}: ${e.text}`));
  if (state.detail && state.detail.id === p.id) {
    $('#d-config').textContent = JSON.stringify(state.detail.config, null, 2);
    const browsable = state.detail.dlq && state.detail.dlq.browsable;
    $('#dlq').hidden = !browsable;
    $('#dlq-why').hidden = browsable;
    if (!browsable) {
      $('#dlq-why').textContent = (state.detail.dlq && state.detail.dlq.why) || 'no dead-letter queue';
      $('#dlq-total').textContent = '';
    }
  }
}

async function refreshDetail(id) {
  const now = Date.now();
  if (state.detail && state.detail.id === id && now - state.detailAt < 5000) return;
  state.detail = await api('GET', `/api/v1/pipelines/${encodeURIComponent(id)}`);
  state.detailAt = now;
}

async function dlqEdit(id, method, suffix, what) {
  if (method === 'DELETE' && !confirm(`Discard ${what}? The records are gone for good.`)) return;
  try {
    const r = await api(method, `/api/v1/pipelines/${encodeURIComponent(id)}/dlq${suffix}`);
    if (method === 'POST') {
      notice(`${id}: replayed ${r.replayed}, failed again ${r.failed}` +
             (r.errors && r.errors.length ? ` (${r.errors[0]})` : ''), r.failed ? 'error' : 'ok');
    } else {
      notice(`${id}: discarded ${r.discarded}`, 'ok');
    }
  } catch (e) {
    notice(`${id}: ${e.message}`);
  }
  state.dlqAt = 0;
  await poll();
}

async function refreshDlq(id) {
  if (!state.detail || !state.detail.dlq || !state.detail.dlq.browsable) return;
  const now = Date.now();
  if (now - state.dlqAt < 3000) return;
  state.dlqAt = now;
  const q = await api('GET', `/api/v1/pipelines/${encodeURIComponent(id)}/dlq?limit=100`);
  $('#dlq-total').textContent = `(${fmtInt(q.total)})`;
  $('#dlq-total').dataset.value = q.total;
  const body = $('#dlq-entries tbody');
  const signature = JSON.stringify([id, q.entries.map((e) => [e.index, e.reason])]);
  if (body.dataset.signature === signature) return;  // unchanged: leave the buttons in place
  body.dataset.signature = signature;
  body.replaceChildren();
  for (const e of q.entries.slice().reverse()) {
    body.append(el('tr', { class: 'dlq-entry', 'data-index': e.index },
      el('td', { class: 'num' }, e.index),
      el('td', { class: 'reason' }, e.reason),
      el('td', {}, el('pre', {}, JSON.stringify(e.record, null, 1))),
      el('td', {},
        el('button', { class: 'replay', onclick: () => dlqEdit(id, 'POST', `/${e.index}/replay`, '') }, 'Replay'),
        ' ',
        el('button', { class: 'discard danger',
                       onclick: () => dlqEdit(id, 'DELETE', `/${e.index}`, `entry ${e.index}`) }, 'Discard'))));
  }
}

// ── the loop ───────────────────────────────────────────────────────────────

async function poll() {
  if (state.busy) return;
  state.busy = true;
  try {
    const r = await api('GET', '/api/v1/pipelines');
    $('#login').hidden = true;
    setConn(true, `live · ${new Date().toLocaleTimeString()}`);
    for (const p of r.pipelines) record(p);
    renderList(r.pipelines);
    const sel = r.pipelines.find((p) => p.id === state.selected);
    if (sel) {
      await refreshDetail(sel.id);
      renderDetail(sel);
      await refreshDlq(sel.id);
    } else {
      renderDetail(null);
    }
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  } catch (e) {
    setConn(false, e.status === 401 ? 'token needed' : `no answer: ${e.message}`);
  } finally {
    state.busy = false;
  }
}

$('#login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  state.token = $('#token').value;
  sessionStorage.setItem('sluice.token', state.token);
  poll();
});

$('#snapshot-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const id = state.selected;
  const tables = $('#snapshot-tables').value.split(',').map((s) => s.trim()).filter(Boolean);
  try {
    await api('POST', `/api/v1/pipelines/${encodeURIComponent(id)}/snapshot`, { tables });
    notice(`${id}: snapshot of ${tables.join(', ')} requested`, 'ok');
  } catch (err) {
    notice(`${id}: snapshot refused: ${err.message}`);
  }
});

$('#dlq-replay-all').addEventListener('click', () => dlqEdit(state.selected, 'POST', '/replay', ''));
$('#dlq-discard-all').addEventListener('click', () => dlqEdit(state.selected, 'DELETE', '', 'every entry'));

$('#reload').addEventListener('click', async () => {
  try {
    const r = await api('POST', '/api/v1/reload');
    notice(`reload: ${r.summary}`, 'ok');
  } catch (e) {
    notice(`reload refused: ${e.message}`);
  }
  state.detailAt = 0;
  poll();
});

poll();
setInterval(poll, state.interval);
