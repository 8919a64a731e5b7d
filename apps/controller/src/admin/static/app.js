// Runledger admin dashboard: plain ES module, no build step. All data comes
// from the REST API and the /ws WebSocket with the operator's bearer token.
const TOKEN_KEY = 'runledger.token';
const ROW = 24;
const LOG_CAP = 200_000;
const PAGE = 1000;
const OLDER_PAGES = 5;
const $ = (id) => document.getElementById(id);
const el = (tag, props = {}, ...children) => {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') n.className = v;
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v);
  }
  for (const c of children) n.append(c instanceof Node ? c : document.createTextNode(String(c ?? '')));
  return n;
};

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? `${status} ${body.error}: ${body.message}` : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

let token = sessionStorage.getItem(TOKEN_KEY);

async function api(path, { method = 'GET', body } = {}) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const isJson = (res.headers.get('content-type') || '').includes('json');
  const data = isJson ? await res.json() : await res.text();
  if (res.status === 401) signOut('The server rejected the token.');
  if (!res.ok) throw new ApiError(res.status, isJson ? data : null);
  return data;
}

function flash(message) {
  const f = $('flash');
  f.textContent = message;
  f.hidden = !message;
  if (message) setTimeout(() => { if (f.textContent === message) f.hidden = true; }, 8000);
}

// ---------------------------------------------------------------- WebSocket
/**
 * One socket; subscriptions remember their cursor so a reconnect resumes exactly where it stopped.
 * Subscribe messages go out only once the server has answered `authenticated` (which re-sends every
 * subscription): one sent while the socket is open but not yet authenticated would be sent twice.
 */
const live = {
  ws: null,
  authed: false,
  subs: new Map(),
  backoff: 500,
  connect() {
    const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`);
    this.ws = ws;
    this.authed = false;
    ws.onopen = () => ws.send(JSON.stringify({ type: 'auth', token }));
    ws.onmessage = (m) => this.onMessage(JSON.parse(m.data));
    ws.onclose = (e) => {
      setConn(false);
      if (this.ws !== ws) return;
      this.ws = null;
      this.authed = false;
      if (e.code === 4401) return signOut('The server rejected the token.');
      setTimeout(() => token && this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 10_000);
    };
  },
  onMessage(msg) {
    if (msg.type === 'authenticated') {
      this.authed = true;
      setConn(true);
      this.backoff = 500;
      for (const [id, s] of this.subs) this.send({ ...s.request(), subscription_id: id });
    } else if (msg.type === 'event') {
      this.subs.get(msg.subscription_id)?.onEvent(msg.event);
    } else if (msg.type === 'error') {
      flash(`live updates: ${msg.error}: ${msg.message}`);
    }
  },
  send(msg) {
    if (this.authed && this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  },
  /** request() builds the subscribe message from the current cursor */
  subscribe(id, request, onEvent) {
    this.subs.set(id, { request, onEvent });
    this.send({ ...request(), subscription_id: id });
  },
  unsubscribe(id) {
    if (this.subs.delete(id)) this.send({ type: 'unsubscribe', subscription_id: id });
  },
  close() {
    const ws = this.ws;
    this.ws = null;
    this.authed = false;
    this.subs.clear();
    ws?.close();
  },
};

function setConn(on) {
  $('conn').className = `conn ${on ? 'on' : 'off'}`;
  $('conn').textContent = on ? 'live' : 'offline';
}

// ---------------------------------------------------------------- helpers
const fmtDuration = (ms) => (ms < 1000 ? `${ms} ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} m ${Math.round((ms % 60_000) / 1000)} s`);
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const taskDuration = (t) => fmtDuration((TERMINAL.has(t.status) ? Date.parse(t.updated_at) : Date.now()) - Date.parse(t.created_at));
const statusBadge = (s) => el('span', { class: `status ${s}` }, s);
const summarize = (e) => {
  const p = e.payload || {};
  const bits = [p.tool, p.step_id, p.role, p.decision, p.stop_reason, p.directive && p.directive.type, p.reason, p.detail, p.error];
  return bits.filter((b) => typeof b === 'string' && b).join(' · ').slice(0, 200);
};

// ---------------------------------------------------------------- event log (virtualized)
const log = { events: [], filtered: [], selected: -1, started: false, types: new Set(), renderQueued: false, oldestLoaded: 0 };

function logMatches(e) {
  const type = $('ev-type').value;
  const task = $('ev-task').value.trim();
  return (!type || e.type === type) && (!task || e.task_id === task);
}

function logRefilter() {
  log.filtered = [];
  for (let i = 0; i < log.events.length; i++) if (logMatches(log.events[i])) log.filtered.push(i);
  logRender(true);
}

function logNoteType(type) {
  if (log.types.has(type)) return;
  log.types.add(type);
  const select = $('ev-type');
  const options = [...log.types].sort();
  const current = select.value;
  select.replaceChildren(el('option', { value: '' }, 'all types'), ...options.map((t) => el('option', { value: t }, t)));
  select.value = current;
}

function logAppend(e) {
  if (log.events.length && e.position <= log.events[log.events.length - 1].position) return;
  log.events.push(e);
  logNoteType(e.type);
  if (logMatches(e)) log.filtered.push(log.events.length - 1);
  if (log.events.length > LOG_CAP) {
    log.events.splice(0, LOG_CAP / 10);
    log.oldestLoaded = log.events[0].position;
    logRefilter();
  }
  logRender(false);
  if (!$('view-tasks').hidden) tasksView.refreshSoon();
}

function logRender(force) {
  if (log.renderQueued && !force) return;
  log.renderQueued = true;
  requestAnimationFrame(() => {
    log.renderQueued = false;
    const vp = $('ev-viewport');
    $('ev-spacer').style.height = `${log.filtered.length * ROW}px`;
    $('ev-count').textContent = `${log.filtered.length} shown / ${log.events.length} loaded`;
    if ($('ev-follow').checked) vp.scrollTop = vp.scrollHeight;
    const first = Math.max(0, Math.floor(vp.scrollTop / ROW) - 5);
    const count = Math.ceil(vp.clientHeight / ROW) + 10;
    const rows = [];
    for (let i = first; i < Math.min(first + count, log.filtered.length); i++) {
      const idx = log.filtered[i];
      const e = log.events[idx];
      rows.push(
        el('div', { class: `evrow${idx === log.selected ? ' sel' : ''}`, 'data-idx': idx, title: e.event_id },
          `#${e.position}  ${e.created_at.slice(11, 23)}  ${e.type.padEnd(24)}  ${e.task_id}:${e.sequence}  ${summarize(e)}`),
      );
    }
    $('ev-rows').style.transform = `translateY(${first * ROW}px)`;
    $('ev-rows').replaceChildren(...rows);
  });
}

async function logStart() {
  if (log.started) return;
  log.started = true;
  const head = (await api('/admin/events?limit=1')).head_position;
  const from = Math.max(0, head - PAGE);
  log.oldestLoaded = from + 1;
  let cursor = from;
  live.subscribe('log', () => ({ type: 'subscribe_all', after_position: cursor }), (e) => {
    cursor = e.position;
    logAppend(e);
  });
}

/** Pages of older events, OLDER_PAGES requests of PAGE events per click, prepended in position order. */
async function logLoadOlder() {
  const before = log.events.length ? log.events[0].position : log.oldestLoaded;
  if (before <= 1) return flash('Nothing older.');
  const from = Math.max(0, before - 1 - PAGE * OLDER_PAGES);
  const older = [];
  for (let after = from; after < before - 1; ) {
    const page = await api(`/admin/events?after_position=${after}&limit=${PAGE}`);
    older.push(...page.events.filter((e) => e.position < before));
    if (page.events.length < PAGE) break;
    after = page.next_after_position;
  }
  older.forEach((e) => logNoteType(e.type));
  log.events = older.concat(log.events);
  log.oldestLoaded = from + 1;
  $('ev-follow').checked = false;
  logRefilter();
}

// ---------------------------------------------------------------- tasks list
const tasksView = {
  cursors: [null],
  page: 0,
  timer: null,
  async load() {
    const q = new URLSearchParams({ limit: '25' });
    const status = $('task-status').value;
    if (status) q.set('status', status);
    const cursor = this.cursors[this.page];
    if (cursor) q.set('cursor', cursor);
    const res = await api(`/tasks?${q}`);
    this.cursors[this.page + 1] = res.next_cursor;
    $('tasks-prev').disabled = this.page === 0;
    $('tasks-next').disabled = !res.next_cursor;
    $('tasks-body').replaceChildren(
      ...res.tasks.map((t) =>
        el('tr', { 'data-task': t.task_id },
          el('td', {}, el('a', { href: `#/tasks/${encodeURIComponent(t.task_id)}` }, t.task_id)),
          el('td', {}, statusBadge(t.status)),
          el('td', {}, t.stop_reason ?? ''),
          el('td', { class: 'num' }, t.usage.rounds),
          el('td', { class: 'num' }, t.usage.total_tokens),
          el('td', { class: 'num' }, taskDuration(t)),
          el('td', {}, new Date(t.created_at).toLocaleString()),
        ),
      ),
    );
    if (!res.tasks.length) $('tasks-body').append(el('tr', {}, el('td', { colspan: '7', class: 'muted' }, 'no tasks')));
  },
  refreshSoon() {
    if (this.timer || this.page !== 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.load().catch((e) => flash(e.message));
    }, 500);
  },
};

// ---------------------------------------------------------------- task page
const taskView = {
  id: null,
  events: [],
  shown: 500,
  timer: null,
  async open(id) {
    if (this.id) live.unsubscribe('task');
    this.id = id;
    this.events = [];
    this.shown = 500;
    $('t-id').textContent = id;
    $('t-input').textContent = '';
    $('t-timeline').replaceChildren();
    await this.loadState();
    let after = 0;
    for (;;) {
      const page = await api(`/tasks/${encodeURIComponent(id)}/events?after_seq=${after}&limit=${PAGE}`);
      this.events.push(...page.events);
      after = page.next_after_seq;
      if (page.events.length < PAGE || this.id !== id) break;
    }
    if (this.id !== id) return;
    this.renderEvents();
    live.subscribe('task', () => ({ type: 'subscribe', task_id: id, after_seq: after }), (e) => {
      if (e.task_id !== this.id || e.sequence <= after) return;
      after = e.sequence;
      this.events.push(e);
      this.renderEvents();
      this.reloadSoon();
    });
  },
  close() {
    if (this.id) live.unsubscribe('task');
    this.id = null;
  },
  reloadSoon() {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.loadState().catch((e) => flash(e.message));
    }, 150);
  },
  async loadState() {
    const t = await api(`/tasks/${encodeURIComponent(this.id)}`);
    $('t-status').replaceChildren(statusBadge(t.status));
    $('t-stop').textContent = t.stop_reason ?? '—';
    $('t-usage').textContent = `${t.usage.rounds} / ${t.usage.tool_calls} / ${t.usage.total_tokens}`;
    $('t-duration').textContent = taskDuration(t);
    $('t-result').textContent = t.result ?? '';
    $('t-cancel').hidden = TERMINAL.has(t.status);
    this.renderPending(t);
  },
  renderPending(t) {
    const box = $('t-pending');
    // keep the cards while the same requests are pending: a re-render would wipe a secret being typed
    const key = `${t.task_id}:${t.pending.map((p) => p.request_id).join(',')}`;
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    if (!t.pending.length) return box.replaceChildren(el('p', { class: 'muted' }, 'none'));
    box.replaceChildren(
      ...t.pending.map((p) => {
        const card = el('div', { class: 'pending', 'data-request': p.request_id });
        card.append(el('div', {}, el('strong', {}, p.kind === 'permission' ? 'Permission' : 'Secret'), ` for ${p.tool}: ${p.reason}`));
        if (p.args) card.append(el('pre', {}, JSON.stringify(p.args, null, 2)));
        const resolve = (path, body) => async () => {
          try {
            await api(`/tasks/${encodeURIComponent(t.task_id)}/${path}/${encodeURIComponent(p.request_id)}`, { method: 'POST', body });
            await this.loadState();
          } catch (e) {
            flash(e.message);
          }
        };
        if (p.kind === 'permission') {
          card.append(
            el('button', { type: 'button', class: 'approve', onclick: resolve('permissions', { decision: 'allow_once' }) }, 'Approve'),
            el('button', { type: 'button', class: 'approve-always', onclick: resolve('permissions', { decision: 'allow_always' }) }, 'Always allow'),
            el('button', { type: 'button', class: 'deny', onclick: resolve('permissions', { decision: 'deny' }) }, 'Deny'),
          );
        } else {
          const input = el('input', { type: 'password', autocomplete: 'off', placeholder: p.secret_name ?? 'secret' });
          card.append(
            el('label', {}, `${p.secret_name ?? 'secret'} `, input),
            el('button', {
              type: 'button', class: 'provide-secret',
              onclick: () => {
                const value = input.value;
                input.value = '';
                if (value) void resolve('secrets', { secret: value })();
              },
            }, 'Provide secret'),
          );
        }
        return card;
      }),
    );
  },
  renderEvents() {
    const list = $('t-timeline');
    const start = Math.max(0, this.events.length - this.shown);
    $('t-more').hidden = start === 0;
    $('t-count').textContent = `(${this.events.length} events)`;
    const received = this.events.find((e) => e.type === 'TASK_RECEIVED');
    if (received) $('t-input').textContent = received.payload.input;
    list.replaceChildren(
      ...this.events.slice(start).map((e) =>
        el('li', {},
          el('details', {},
            el('summary', {}, `${e.sequence}. ${e.created_at.slice(11, 23)} ${e.type} ${summarize(e)}`),
            el('pre', {}, JSON.stringify(e, null, 2)),
          ),
        ),
      ),
    );
    this.renderPlan();
  },
  renderPlan() {
    const plan = [...this.events].reverse().find((e) => e.type === 'PLAN_STARTED');
    const box = $('t-plan');
    if (!plan) return box.replaceChildren(el('p', { class: 'muted' }, 'no plan'));
    const steps = plan.payload.steps;
    const state = new Map(steps.map((s) => [s.id, 'pending']));
    for (const e of this.events) {
      if (e.sequence < plan.sequence || e.payload.plan_id !== plan.payload.plan_id) continue;
      if (e.type === 'STEP_STARTED') state.set(e.payload.step_id, 'running');
      if (e.type === 'STEP_COMPLETED') state.set(e.payload.step_id, 'completed');
      if (e.type === 'STEP_FAILED') state.set(e.payload.step_id, e.payload.skipped ? 'skipped' : 'failed');
    }
    box.replaceChildren(renderDag(steps, state));
  },
};

/** Steps laid out in columns by dependency depth, edges from each dependency. */
function renderDag(steps, state) {
  const NS = 'http://www.w3.org/2000/svg';
  const byId = new Map(steps.map((s) => [s.id, s]));
  const depth = new Map();
  const depthOf = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    const deps = (byId.get(id)?.depends_on ?? []).filter((d) => byId.has(d));
    const d = deps.length ? 1 + Math.max(...deps.map((x) => depthOf(x, seen))) : 0;
    depth.set(id, d);
    return d;
  };
  steps.forEach((s) => depthOf(s.id));
  const columns = [];
  for (const s of steps) (columns[depth.get(s.id)] ??= []).push(s);
  const W = 190, H = 46, GX = 50, GY = 14;
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((s, y) => pos.set(s.id, { x: 10 + x * (W + GX), y: 10 + y * (H + GY) })));
  const width = 20 + columns.length * (W + GX);
  const height = 20 + Math.max(...columns.map((c) => c.length)) * (H + GY);
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('class', 'dag');
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  const add = (parent, tag, attrs, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    parent.append(n);
    return n;
  };
  const defs = add(svg, 'defs', {});
  const marker = add(defs, 'marker', { id: 'arrow', viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '6', markerHeight: '6', orient: 'auto' });
  add(marker, 'path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8c959f' });
  for (const s of steps) {
    for (const d of s.depends_on) {
      const a = pos.get(d), b = pos.get(s.id);
      if (a && b) add(svg, 'line', { x1: a.x + W, y1: a.y + H / 2, x2: b.x, y2: b.y + H / 2 });
    }
  }
  for (const s of steps) {
    const p = pos.get(s.id);
    const g = add(svg, 'g', { 'data-step': s.id, 'data-state': state.get(s.id) });
    add(g, 'rect', { x: p.x, y: p.y, width: W, height: H, class: state.get(s.id) });
    add(g, 'text', { x: p.x + 6, y: p.y + 17 }, `${s.id} · ${s.kind}${s.tool ? ` · ${s.tool}` : ''}`.slice(0, 30));
    add(g, 'text', { x: p.x + 6, y: p.y + 35 }, state.get(s.id));
    add(g, 'title', {}, s.description || s.id);
  }
  return svg;
}

// ---------------------------------------------------------------- routing and boot
function route() {
  const hash = location.hash || '#/tasks';
  const m = /^#\/tasks\/(.+)$/.exec(hash);
  for (const v of ['view-tasks', 'view-task', 'view-events']) $(v).hidden = true;
  $('nav-tasks').classList.toggle('active', hash.startsWith('#/tasks'));
  $('nav-events').classList.toggle('active', hash === '#/events');
  if (m) {
    $('view-task').hidden = false;
    taskView.open(decodeURIComponent(m[1])).catch((e) => flash(e.message));
  } else {
    taskView.close();
    if (hash === '#/events') {
      $('view-events').hidden = false;
      logRender(true);
    } else {
      $('view-tasks').hidden = false;
      tasksView.load().catch((e) => flash(e.message));
    }
  }
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  token = null;
  live.close();
  log.started = false;
  $('app').hidden = true;
  $('logout').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
}

async function signIn() {
  try {
    const doc = await api('/docs/openapi.json');
    const statusParam = doc.paths['/tasks'].get.parameters.find((p) => p.name === 'status');
    const select = $('task-status');
    select.replaceChildren(el('option', { value: '' }, 'any'), ...(statusParam?.schema?.enum ?? []).map((s) => el('option', { value: s }, s)));
  } catch (e) {
    if (!token) return;
    return signOut(e.message);
  }
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  live.connect();
  logStart().catch((e) => flash(`event log: ${e.message}`));
  route();
}

$('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  token = $('token-input').value.trim();
  $('token-input').value = '';
  sessionStorage.setItem(TOKEN_KEY, token);
  void signIn();
});
$('logout').addEventListener('click', () => signOut(''));
$('submit-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = $('submit-input').value.trim();
  if (!input) return;
  try {
    const res = await api('/tasks', { method: 'POST', body: { input } });
    $('submit-input').value = '';
    location.hash = `#/tasks/${encodeURIComponent(res.task_id)}`;
  } catch (e) {
    flash(e.message);
  }
});
$('task-status').addEventListener('change', () => {
  tasksView.cursors = [null];
  tasksView.page = 0;
  tasksView.load().catch((e) => flash(e.message));
});
$('tasks-refresh').addEventListener('click', () => tasksView.load().catch((e) => flash(e.message)));
$('tasks-next').addEventListener('click', () => {
  tasksView.page++;
  tasksView.load().catch((e) => flash(e.message));
});
$('tasks-prev').addEventListener('click', () => {
  tasksView.page = Math.max(0, tasksView.page - 1);
  tasksView.load().catch((e) => flash(e.message));
});
$('t-cancel').addEventListener('click', async () => {
  try {
    await api(`/tasks/${encodeURIComponent(taskView.id)}/cancel`, { method: 'POST' });
    await taskView.loadState();
  } catch (e) {
    flash(e.message);
  }
});
$('t-more').addEventListener('click', () => {
  taskView.shown += 500;
  taskView.renderEvents();
});
$('ev-type').addEventListener('change', logRefilter);
$('ev-task').addEventListener('input', logRefilter);
$('ev-older').addEventListener('click', () => logLoadOlder().catch((e) => flash(e.message)));
$('ev-viewport').addEventListener('scroll', () => logRender(false));
$('ev-viewport').addEventListener('wheel', () => ($('ev-follow').checked = false));
$('ev-rows').addEventListener('click', (ev) => {
  const row = ev.target.closest('.evrow');
  if (!row) return;
  log.selected = Number(row.dataset.idx);
  $('ev-detail').textContent = JSON.stringify(log.events[log.selected], null, 2);
  logRender(true);
});
window.addEventListener('hashchange', route);

// The server prints the dashboard address with the token in the fragment (never sent to the server).
const fragment = /^#token=([^&]+)$/.exec(location.hash);
if (fragment) {
  token = decodeURIComponent(fragment[1]);
  sessionStorage.setItem(TOKEN_KEY, token);
  history.replaceState(null, '', `${location.pathname}#/tasks`);
}
if (token) void signIn();
else signOut('');
