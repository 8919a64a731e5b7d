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

const SVG_NS = 'http://www.w3.org/2000/svg';
const svgAdd = (parent, tag, attrs, text) => {
  const n = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  if (text !== undefined) n.textContent = text;
  parent.append(n);
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
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
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
  if (message)
    setTimeout(() => {
      if (f.textContent === message) f.hidden = true;
    }, 8000);
}

/** `load` once, `ms` after the first of a burst of calls (live events come in bursts); a failure is flashed. */
function coalesced(ms, load) {
  let timer = null;
  return () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      load().catch((e) => flash(e.message));
    }, ms);
  };
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
const fmtDuration = (ms) =>
  ms < 1000
    ? `${ms} ms`
    : ms < 60_000
      ? `${(ms / 1000).toFixed(1)} s`
      : `${Math.floor(ms / 60_000)} m ${Math.round((ms % 60_000) / 1000)} s`;
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const TERMINAL_EVENTS = new Set(['TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED']);
const taskDuration = (t) => fmtDuration(t.duration_ms ?? Date.now() - Date.parse(t.created_at));
const statusBadge = (s) => el('span', { class: `status ${s}` }, s);
const fmtAge = (iso) => {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 60
    ? `${s} s`
    : s < 3600
      ? `${Math.floor(s / 60)} min`
      : s < 86_400
        ? `${Math.floor(s / 3600)} h`
        : `${Math.floor(s / 86_400)} d`;
};
const fmtCost = (usd) => (usd === 0 ? '$0' : usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`);
const taskHref = (id) => `#/tasks/${encodeURIComponent(id)}`;
/** Event types after which the approvals inbox may have changed. */
const INBOX_EVENTS = new Set([
  'TASK_AWAITING_PERMISSION',
  'TASK_AWAITING_SECRET',
  'PERMISSION_RESOLVED',
  'SECRET_PROVIDED',
  ...TERMINAL_EVENTS,
]);
const summarize = (e) => {
  const p = e.payload || {};
  const bits = [
    p.tool,
    p.step_id,
    p.role,
    p.decision,
    p.stop_reason,
    p.directive && p.directive.type,
    p.reason,
    p.detail,
    p.error,
    e.type === 'PERMISSION_RESOLVED' && p.covers,
  ];
  return bits
    .filter((b) => typeof b === 'string' && b)
    .join(' · ')
    .slice(0, 200);
};

// ---------------------------------------------------------------- event log (virtualized)
const log = {
  events: [],
  filtered: [],
  selected: -1,
  started: false,
  types: new Set(),
  renderQueued: false,
  oldestLoaded: 0,
};

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
  select.replaceChildren(
    el('option', { value: '' }, 'all types'),
    ...options.map((t) => el('option', { value: t }, t)),
  );
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
  if (INBOX_EVENTS.has(e.type)) approvals.refreshSoon();
  if (!$('view-charts').hidden && TERMINAL_EVENTS.has(e.type)) charts.refreshSoon();
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
        el(
          'div',
          { class: `evrow${idx === log.selected ? ' sel' : ''}`, 'data-idx': idx, title: e.event_id },
          `#${e.position}  ${e.created_at.slice(11, 23)}  ${e.type.padEnd(24)}  ${e.task_id}:${e.sequence}  ${summarize(e)}`,
        ),
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
  live.subscribe(
    'log',
    () => ({ type: 'subscribe_all', after_position: cursor }),
    (e) => {
      cursor = e.position;
      logAppend(e);
    },
  );
}

/** Pages of older events, OLDER_PAGES requests of PAGE events per click, prepended in position order. */
async function logLoadOlder() {
  const before = log.events.length ? log.events[0].position : log.oldestLoaded;
  if (before <= 1) return flash('Nothing older.');
  const from = Math.max(0, before - 1 - PAGE * OLDER_PAGES);
  const older = [];
  for (let after = from; after < before - 1;) {
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
  /** back to the first page, e.g. after a filter changed */
  reset() {
    this.cursors = [null];
    this.page = 0;
    this.load().catch((e) => flash(e.message));
  },
  async load() {
    const q = new URLSearchParams({ limit: '25' });
    const status = $('task-status').value;
    if (status) q.set('status', status);
    const session = $('task-session').value.trim();
    if (session) q.set('session_id', session);
    const text = $('task-q').value.trim();
    if (text) q.set('q', text);
    const cursor = this.cursors[this.page];
    if (cursor) q.set('cursor', cursor);
    const res = await api(`/tasks?${q}`);
    this.cursors[this.page + 1] = res.next_cursor;
    $('tasks-prev').disabled = this.page === 0;
    $('tasks-next').disabled = !res.next_cursor;
    $('tasks-body').replaceChildren(
      ...res.tasks.map((t) =>
        el(
          'tr',
          { 'data-task': t.task_id },
          el(
            'td',
            { class: 'input', title: t.task_id },
            el('a', { href: taskHref(t.task_id) }, t.input_first_line || '(no input)'),
            el('code', {}, t.task_id),
          ),
          el('td', {}, statusBadge(t.status)),
          el('td', {}, t.stop_reason ?? ''),
          el('td', { class: 'num', title: new Date(t.created_at).toLocaleString() }, fmtAge(t.created_at)),
          el('td', { class: 'num' }, taskDuration(t)),
          el('td', { class: 'num' }, t.usage.total_tokens),
          el('td', { class: 'num' }, fmtCost(t.usage.cost_usd)),
          el(
            'td',
            {},
            el(
              'button',
              {
                type: 'button',
                class: 'linkish session',
                title: 'show only this session',
                onclick: () => {
                  $('task-session').value = t.session_id;
                  this.reset();
                },
              },
              t.session_id,
            ),
          ),
        ),
      ),
    );
    if (!res.tasks.length)
      $('tasks-body').append(el('tr', {}, el('td', { colspan: '8', class: 'muted' }, 'no tasks')));
  },
  // only the first page refreshes by itself: a later one would jump under the reader
  refreshSoon: coalesced(500, () => (tasksView.page === 0 ? tasksView.load() : Promise.resolve())),
};

// ---------------------------------------------------------------- pending requests
/** What a permission request is about, in one line: the command or path, else the arguments. */
function requestConcerns(p) {
  const a = p.args ?? {};
  for (const k of ['command', 'cmd', 'path', 'url']) if (typeof a[k] === 'string') return a[k];
  return p.args ? JSON.stringify(p.args) : '';
}

/**
 * The inputs of an MCP server's form (a permission request whose args hold its requested_schema):
 * one per field, prefilled with its default; `read()` gives the content to send (empty optional
 * fields left out).
 */
function formFields(schema) {
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {}).map(([name, f]) => {
    const many = f.type === 'array';
    const of = many ? (f.items ?? {}) : f;
    const choices = of.enum ?? (of.oneOf ?? of.anyOf ?? []).map((o) => o.const);
    const input =
      f.type === 'boolean'
        ? el('input', { type: 'checkbox', name })
        : choices.length
          ? el(
              'select',
              many ? { name, multiple: '' } : { name },
              ...(many ? [] : [el('option', { value: '' }, '')]),
              ...choices.map((c) => el('option', { value: c }, c)),
            )
          : el('input', { type: f.type === 'number' || f.type === 'integer' ? 'number' : 'text', name });
    if (f.type === 'boolean') input.checked = f.default === true;
    else if (many) for (const o of input.options ?? []) o.selected = (f.default ?? []).includes(o.value);
    else if (f.default !== undefined) input.value = String(f.default);
    const read = () => {
      if (f.type === 'boolean') return input.checked;
      if (many) return [...input.selectedOptions].map((o) => o.value);
      if (input.value === '') return undefined;
      return f.type === 'number' || f.type === 'integer' ? Number(input.value) : input.value;
    };
    const label = el(
      'label',
      { class: 'form-field' },
      `${f.title ?? name}${required.has(name) ? ' *' : ''} `,
      input,
    );
    return { name, label, read };
  });
  return {
    labels: fields.map((f) => f.label),
    read: () => Object.fromEntries(fields.map((f) => [f.name, f.read()]).filter(([, v]) => v !== undefined)),
  };
}

/** One pending request with its answer controls; `after` runs once an answer was accepted. */
function pendingCard(task, p, after) {
  // a request of a task this one delegated to is answered through that task
  const owner = p.task_id ?? task.task_id;
  const card = el('div', { class: 'pending', 'data-request': p.request_id, 'data-task': owner });
  if (owner !== task.task_id)
    card.append(
      el('div', { class: 'task' }, 'asked by delegated task ', el('a', { href: taskHref(owner) }, owner)),
    );
  card.append(
    el(
      'div',
      {},
      el('strong', {}, p.kind === 'permission' ? 'Permission' : 'Secret'),
      ` for ${p.tool}: ${p.reason}`,
    ),
  );
  const form = p.kind === 'permission' && p.args?.requested_schema ? p.args : null;
  const concerns = p.kind === 'permission' && !form ? requestConcerns(p) : '';
  if (concerns) card.append(el('code', { class: 'concerns' }, concerns));
  // "Always allow" lets more through than this one call: say what before it is pressed
  if (p.covers) card.append(el('p', { class: 'covers' }, p.covers));
  const resolve = (path, body) => async () => {
    try {
      await api(`/tasks/${encodeURIComponent(owner)}/${path}/${encodeURIComponent(p.request_id)}`, {
        method: 'POST',
        body,
      });
      await after();
    } catch (e) {
      flash(e.message);
    }
  };
  if (form) {
    // an MCP server asks the person to fill in a form: sent back as the answer's content, or declined
    const fields = formFields(form.requested_schema);
    card.append(
      el('p', { class: 'form-message' }, form.message ?? ''),
      ...fields.labels,
      el(
        'button',
        {
          type: 'button',
          class: 'send-form',
          onclick: () => void resolve('permissions', { decision: 'allow_once', content: fields.read() })(),
        },
        'Send',
      ),
      el(
        'button',
        { type: 'button', class: 'deny', onclick: resolve('permissions', { decision: 'deny' }) },
        'Decline',
      ),
    );
  } else if (p.kind === 'permission') {
    card.append(
      el(
        'button',
        { type: 'button', class: 'approve', onclick: resolve('permissions', { decision: 'allow_once' }) },
        'Approve',
      ),
      el(
        'button',
        {
          type: 'button',
          class: 'approve-always',
          title: p.covers ?? '',
          onclick: resolve('permissions', { decision: 'allow_always' }),
        },
        'Always allow',
      ),
      el(
        'button',
        { type: 'button', class: 'deny', onclick: resolve('permissions', { decision: 'deny' }) },
        'Deny',
      ),
    );
  } else {
    const input = el('input', {
      type: 'password',
      autocomplete: 'off',
      placeholder: p.secret_name ?? 'secret',
    });
    card.append(
      el('label', {}, `${p.secret_name ?? 'secret'} `, input),
      el(
        'button',
        {
          type: 'button',
          class: 'provide-secret',
          onclick: () => {
            const value = input.value;
            input.value = '';
            if (value) void resolve('secrets', { secret: value })();
          },
        },
        'Provide secret',
      ),
    );
  }
  return card;
}

// ---------------------------------------------------------------- approvals inbox
const approvals = {
  /** every task waiting for a person, oldest request first (it has waited longest) */
  async load() {
    const all = async (status) => {
      const tasks = [];
      for (let cursor = null; ;) {
        const page = await api(`/tasks?status=${status}&limit=500${cursor ? `&cursor=${cursor}` : ''}`);
        tasks.push(...page.tasks);
        if (!(cursor = page.next_cursor)) return tasks;
      }
    };
    const waiting = (await Promise.all(['awaiting_permission', 'awaiting_secret'].map(all)))
      .flat()
      .sort((a, b) => a.created_at.localeCompare(b.created_at));
    const items = waiting.flatMap((t) => t.pending.map((p) => ({ task: t, request: p })));
    const count = $('approvals-count');
    count.textContent = String(items.length);
    count.classList.toggle('some', items.length > 0);
    $('approvals-summary').textContent = items.length
      ? `(${items.length} request${items.length === 1 ? '' : 's'} in ${waiting.length} task${waiting.length === 1 ? '' : 's'})`
      : '';
    const box = $('approvals-list');
    // keep the cards while the same requests wait: a re-render would wipe a secret being typed
    const key = items.map((i) => `${i.task.task_id}/${i.request.request_id}`).join(',');
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    if (!items.length) return box.replaceChildren(el('p', { class: 'muted' }, 'nothing waits'));
    box.replaceChildren(
      ...items.map(({ task, request }) => {
        const card = pendingCard(task, request, () => this.load());
        card.prepend(
          el(
            'div',
            { class: 'task' },
            el('a', { href: taskHref(task.task_id) }, task.input_first_line || task.task_id),
            ` · ${task.session_id} · waiting ${fmtAge(task.updated_at)}`,
          ),
        );
        return card;
      }),
    );
  },
  refreshSoon: coalesced(200, () => approvals.load()),
};

// ---------------------------------------------------------------- task page
const TIMELINE_PAGE = 500;
const PLAN_EVENTS = new Set(['PLAN_STARTED', 'STEP_STARTED', 'STEP_COMPLETED', 'STEP_FAILED']);

/** A tool's output as text: stdout and stderr blocks and the exit code for commands, else the value itself. */
function toolOutput(e) {
  const result = e.payload.result;
  const box = el('div', { class: 'tool-output' });
  if (e.type === 'TOOL_FAILED') box.append(el('pre', { class: 'stderr error-text' }, e.payload.error));
  if (!result) return box;
  const out = result.output;
  const exit =
    out && typeof out === 'object' && 'exit_code' in out ? out.exit_code : result.metadata?.exit_code;
  if (out && typeof out === 'object' && ('stdout' in out || 'stderr' in out)) {
    for (const stream of ['stdout', 'stderr'])
      if (typeof out[stream] === 'string' && out[stream] !== '')
        box.append(el('div', { class: 'label' }, stream), el('pre', { class: stream }, out[stream]));
  } else if (out !== undefined && out !== null && out !== '') {
    box.append(el('pre', { class: 'stdout' }, typeof out === 'string' ? out : JSON.stringify(out, null, 2)));
  }
  if (result.error && e.type !== 'TOOL_FAILED') box.append(el('pre', { class: 'stderr' }, result.error));
  if (typeof exit === 'number')
    box.append(el('div', { class: `exit-code${exit === 0 ? '' : ' bad'}` }, `exit code ${exit}`));
  return box;
}

function timelineItem(e) {
  const li = el(
    'li',
    { 'data-seq': e.sequence },
    el(
      'button',
      {
        type: 'button',
        class: 'linkish fork',
        title: `start a new task from event ${e.sequence} of this one`,
      },
      'fork from here',
    ),
    el(
      'details',
      {},
      el('summary', {}, `${e.sequence}. ${e.created_at.slice(11, 23)} ${e.type} ${summarize(e)}`),
      el('pre', {}, JSON.stringify(e, null, 2)),
    ),
  );
  if (e.type === 'TOOL_COMPLETED' || e.type === 'TOOL_FAILED') li.append(toolOutput(e));
  return li;
}

const taskView = {
  id: null,
  events: [],
  /** the last sequence the shown state (status, pending, usage) was read at */
  stateSeq: 0,
  /** index in events of the oldest event in the timeline */
  firstShown: 0,
  async open(id) {
    if (this.id) live.unsubscribe('task');
    this.id = id;
    this.events = [];
    $('t-id').textContent = id;
    $('t-input').textContent = '';
    $('t-pending').dataset.key = '';
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
    this.firstShown = Math.max(0, this.events.length - TIMELINE_PAGE);
    $('t-timeline').replaceChildren(...this.events.slice(this.firstShown).map(timelineItem));
    this.renderFacts();
    this.renderPlan();
    // the task moved on between reading its state and reading its events: the state is read again
    if (after > this.stateSeq) this.reloadSoon();
    live.subscribe(
      'task',
      // the tasks below this one too: their states and requests show in the tree and pending list
      () => ({ type: 'subscribe', task_id: id, after_seq: after, include_children: true }),
      (e) => {
        if (this.id !== id) return;
        if (e.task_id !== id) return this.reloadSoon();
        if (e.sequence <= after) return;
        after = e.sequence;
        this.append(e);
        this.reloadSoon();
      },
    );
  },
  /** a live event: one item appended, the rest of the timeline untouched */
  append(e) {
    this.events.push(e);
    $('t-timeline').append(timelineItem(e));
    this.renderFacts();
    if (PLAN_EVENTS.has(e.type)) this.renderPlan();
  },
  /** older events put in front of the timeline, a page at a time */
  showEarlier() {
    const from = Math.max(0, this.firstShown - TIMELINE_PAGE);
    $('t-timeline').prepend(...this.events.slice(from, this.firstShown).map(timelineItem));
    this.firstShown = from;
    this.renderFacts();
  },
  renderFacts() {
    $('t-more').hidden = this.firstShown === 0;
    $('t-count').textContent = `(${this.events.length} events)`;
    const received = this.events.find((e) => e.type === 'TASK_RECEIVED');
    if (received) $('t-input').textContent = received.payload.input;
    const from = received?.payload.forked_from;
    $('t-forked-label').hidden = $('t-forked').hidden = !from;
    $('t-forked').replaceChildren(
      ...(from
        ? [el('a', { href: taskHref(from.task_id) }, from.task_id), ` at event ${from.sequence}`]
        : []),
    );
  },
  close() {
    if (this.id) live.unsubscribe('task');
    this.id = null;
  },
  reloadSoon: coalesced(150, () => taskView.loadState()),
  async loadState() {
    const t = await api(`/tasks/${encodeURIComponent(this.id)}`);
    this.stateSeq = t.last_seq;
    $('t-status').replaceChildren(statusBadge(t.status));
    $('t-stop').textContent = t.stop_reason ?? '—';
    $('t-usage').textContent =
      `${t.usage.rounds} / ${t.usage.tool_calls} / ${t.usage.total_tokens} (${fmtCost(t.usage.cost_usd)})`;
    $('t-duration').textContent = taskDuration(t);
    $('t-result').textContent = t.result ?? '';
    $('t-cancel').hidden = TERMINAL.has(t.status);
    this.renderPending(t);
    await this.renderTree(t);
  },
  /** the whole tree the task belongs to, from its root down, each task linked, this one marked */
  async renderTree(t) {
    const box = $('t-tree');
    const node = async (task, agent, depth) => {
      const item = el(
        'li',
        { 'data-task': task.task_id, class: task.task_id === t.task_id ? 'current' : '' },
        el('a', { href: taskHref(task.task_id) }, task.input_first_line || task.task_id),
        agent ? el('span', { class: 'agent' }, `(${agent})`) : '',
        statusBadge(task.status),
      );
      // the depth limit bounds a real tree; this bound only guards the page against a malformed one
      if (depth < 10) {
        const { children } = await api(`/tasks/${encodeURIComponent(task.task_id)}/children`);
        if (children.length)
          item.append(el('ul', {}, ...(await Promise.all(children.map((c) => node(c, c.agent, depth + 1))))));
      }
      return item;
    };
    const root = t.root_task_id === t.task_id ? t : await api(`/tasks/${encodeURIComponent(t.root_task_id)}`);
    const tree = await node(root, root.agent, 0);
    if (this.id !== t.task_id) return;
    if (root.task_id === t.task_id && !tree.querySelector('ul'))
      return box.replaceChildren(el('p', { class: 'muted' }, 'no parent, no children'));
    box.replaceChildren(el('ul', { class: 'tree' }, tree));
  },
  renderPending(t) {
    const box = $('t-pending');
    // keep the cards while the same requests are pending: a re-render would wipe a secret being typed
    const key = `${t.task_id}:${t.pending.map((p) => p.request_id).join(',')}`;
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    if (!t.pending.length) return box.replaceChildren(el('p', { class: 'muted' }, 'none'));
    box.replaceChildren(...t.pending.map((p) => pendingCard(t, p, () => this.loadState())));
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
  const W = 190,
    H = 46,
    GX = 50,
    GY = 14;
  const pos = new Map();
  columns.forEach((col, x) =>
    col.forEach((s, y) => pos.set(s.id, { x: 10 + x * (W + GX), y: 10 + y * (H + GY) })),
  );
  const width = 20 + columns.length * (W + GX);
  const height = 20 + Math.max(...columns.map((c) => c.length)) * (H + GY);
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('class', 'dag');
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  const defs = svgAdd(svg, 'defs', {});
  const marker = svgAdd(defs, 'marker', {
    id: 'arrow',
    viewBox: '0 0 10 10',
    refX: '10',
    refY: '5',
    markerWidth: '6',
    markerHeight: '6',
    orient: 'auto',
  });
  svgAdd(marker, 'path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8c959f' });
  for (const s of steps) {
    for (const d of s.depends_on) {
      const a = pos.get(d),
        b = pos.get(s.id);
      if (a && b) svgAdd(svg, 'line', { x1: a.x + W, y1: a.y + H / 2, x2: b.x, y2: b.y + H / 2 });
    }
  }
  for (const s of steps) {
    const p = pos.get(s.id);
    const g = svgAdd(svg, 'g', { 'data-step': s.id, 'data-state': state.get(s.id) });
    svgAdd(g, 'rect', { x: p.x, y: p.y, width: W, height: H, class: state.get(s.id) });
    svgAdd(
      g,
      'text',
      { x: p.x + 6, y: p.y + 17 },
      `${s.id} · ${s.kind}${s.tool ? ` · ${s.tool}` : ''}`.slice(0, 30),
    );
    svgAdd(g, 'text', { x: p.x + 6, y: p.y + 35 }, state.get(s.id));
    svgAdd(g, 'title', {}, s.description || s.id);
  }
  return svg;
}

// ---------------------------------------------------------------- charts
const PALETTE = [
  '#0969da',
  '#bf8700',
  '#8250df',
  '#cf222e',
  '#1b7c83',
  '#e16f24',
  '#57606a',
  '#bc4c00',
  '#116329',
];
/** completed is always green, failures get the palette in a stable (alphabetical) order */
const seriesColors = (names) => {
  const colors = new Map();
  let i = 0;
  for (const n of names) colors.set(n, n === 'completed' ? '#2da44e' : PALETTE[i++ % PALETTE.length]);
  return colors;
};
/** a round axis maximum at or above v: 1, 2, 2.5 or 5 times a power of ten */
const niceMax = (v) => {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
};

/**
 * Bars over categories (hours, days): `stacked` puts a category's series on top of each other, else side by
 * side. Every bar carries its category, series and value as data attributes and a tooltip.
 */
function barChart({ name, categories, labels, series, stacked, format }) {
  const W = 900,
    H = 220,
    left = 64,
    right = 10,
    top = 10,
    bottom = 40;
  const plotW = W - left - right,
    plotH = H - top - bottom;
  const max = niceMax(
    Math.max(
      0,
      ...categories.map((_, i) =>
        stacked
          ? series.reduce((sum, s) => sum + s.values[i], 0)
          : Math.max(0, ...series.map((s) => s.values[i])),
      ),
    ),
  );
  const legendRows = Math.ceil(series.length / 4);
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H + legendRows * 18}`);
  svg.setAttribute('width', '100%');
  svg.setAttribute('data-chart', name);
  svg.setAttribute('role', 'img');
  const y = (v) => top + plotH - (v / max) * plotH;
  for (let g = 0; g <= 4; g++) {
    const v = (max * g) / 4;
    svgAdd(svg, 'line', { class: 'grid-line', x1: left, x2: W - right, y1: y(v), y2: y(v) });
    svgAdd(svg, 'text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, format(v));
  }
  svgAdd(svg, 'line', { class: 'axis', x1: left, x2: W - right, y1: y(0), y2: y(0) });
  const slot = plotW / categories.length;
  const barW = stacked ? Math.max(slot * 0.8, 0.5) : Math.max((slot * 0.8) / series.length, 0.5);
  const labelEvery = Math.max(1, Math.ceil(categories.length / 10));
  categories.forEach((category, i) => {
    const x0 = left + i * slot + slot * 0.1;
    let base = 0;
    series.forEach((s, k) => {
      const v = s.values[i];
      if (!v) return;
      const x = stacked ? x0 : x0 + k * barW;
      const from = stacked ? base : 0;
      base += v;
      const bar = svgAdd(svg, 'rect', {
        class: 'bar',
        x,
        y: y(from + v),
        width: barW,
        height: Math.max(y(from) - y(from + v), 0.5),
        fill: s.color,
        'data-category': category,
        'data-series': s.name,
        'data-value': v,
      });
      svgAdd(bar, 'title', {}, `${labels[i]} · ${s.name}: ${format(v)}`);
    });
    if (i % labelEvery === 0)
      svgAdd(svg, 'text', { x: x0, y: H - bottom + 14, 'text-anchor': 'start' }, labels[i]);
  });
  series.forEach((s, k) => {
    const lx = left + (k % 4) * 200,
      ly = H + Math.floor(k / 4) * 18;
    svgAdd(svg, 'rect', { x: lx, y: ly - 10, width: 10, height: 10, fill: s.color });
    svgAdd(svg, 'text', { x: lx + 14, y: ly }, s.name);
  });
  return svg;
}

/** Every hour (or day) from the window's start to its end, so quiet periods show as gaps. */
function timeBuckets(since, until, stepMs) {
  const out = [];
  const start = Math.floor(Date.parse(since) / stepMs) * stepMs;
  for (let t = start; t <= Date.parse(until); t += stepMs) out.push(new Date(t).toISOString());
  return out;
}

const fmtCount = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
const fmtTokens = (v) =>
  v >= 1e6 ? `${(v / 1e6).toFixed(1)}M` : v >= 1e3 ? `${(v / 1e3).toFixed(1)}k` : fmtCount(v);

const charts = {
  async load() {
    const stats = await api(`/admin/stats?days=${$('charts-days').value}`);
    const hours = timeBuckets(stats.since, stats.until, 3_600_000);
    const reasons = [...new Set(stats.tasks_per_hour.map((r) => r.stop_reason ?? 'none'))].sort();
    const reasonColor = seriesColors(reasons);
    const perHour = new Map(
      stats.tasks_per_hour.map((r) => [`${r.hour}|${r.stop_reason ?? 'none'}`, r.tasks]),
    );
    const hourLabel = (h) => `${h.slice(5, 10)} ${h.slice(11, 13)}h`;
    this.show(
      'chart-tasks',
      reasons.length &&
        barChart({
          name: 'tasks-per-hour',
          categories: hours,
          labels: hours.map(hourLabel),
          stacked: true,
          format: fmtCount,
          series: reasons.map((r) => ({
            name: r,
            color: reasonColor.get(r),
            values: hours.map((h) => perHour.get(`${h}|${r}`) ?? 0),
          })),
        }),
    );
    const days = timeBuckets(stats.since, stats.until, 86_400_000).map((d) => d.slice(0, 10));
    const models = [...new Set(stats.usage_per_day.map((u) => u.model))].sort();
    const modelColor = seriesColors(models);
    const usage = new Map(stats.usage_per_day.map((u) => [`${u.day}|${u.model}`, u]));
    const perModel = (field, name, format) =>
      models.length &&
      barChart({
        name,
        categories: days,
        labels: days.map((d) => d.slice(5)),
        stacked: false,
        format,
        series: models.map((m) => ({
          name: m,
          color: modelColor.get(m),
          values: days.map((d) => usage.get(`${d}|${m}`)?.[field] ?? 0),
        })),
      });
    this.show('chart-tokens', perModel('total_tokens', 'tokens-per-day', fmtTokens));
    this.show(
      'chart-cost',
      perModel('cost_usd', 'cost-per-day', (v) => `$${Number(v.toPrecision(3))}`),
    );
    const durations = new Map(stats.duration_per_day.map((d) => [d.day, d]));
    this.show(
      'chart-duration',
      stats.duration.tasks > 0 &&
        barChart({
          name: 'duration-per-day',
          categories: days,
          labels: days.map((d) => d.slice(5)),
          stacked: false,
          format: (v) => fmtDuration(Math.round(v)),
          series: [
            { name: 'p50', color: '#0969da', values: days.map((d) => durations.get(d)?.p50_ms ?? 0) },
            { name: 'p95', color: '#bf8700', values: days.map((d) => durations.get(d)?.p95_ms ?? 0) },
          ],
        }),
    );
    const tokens = stats.usage_per_day.reduce((n, u) => n + u.total_tokens, 0);
    const cost = stats.usage_per_day.reduce((n, u) => n + u.cost_usd, 0);
    const d = stats.duration;
    $('charts-summary').textContent =
      `${d.tasks} tasks ended` +
      (d.tasks ? ` · duration p50 ${fmtDuration(d.p50_ms)}, p95 ${fmtDuration(d.p95_ms)}` : '') +
      ` · ${fmtTokens(tokens)} tokens · ${fmtCost(cost)}`;
  },
  show(id, svg) {
    $(id).replaceChildren(svg || el('p', { class: 'muted' }, 'no data in this window'));
  },
  refreshSoon: coalesced(1000, () => charts.load()),
};

// ---------------------------------------------------------------- routing and boot
const VIEWS = ['view-tasks', 'view-task', 'view-approvals', 'view-charts', 'view-events'];

function route() {
  const hash = location.hash || '#/tasks';
  const m = /^#\/tasks\/(.+)$/.exec(hash);
  for (const v of VIEWS) $(v).hidden = true;
  $('nav-tasks').classList.toggle('active', hash.startsWith('#/tasks'));
  $('nav-approvals').classList.toggle('active', hash === '#/approvals');
  $('nav-charts').classList.toggle('active', hash === '#/charts');
  $('nav-events').classList.toggle('active', hash === '#/events');
  if (m) {
    $('view-task').hidden = false;
    taskView.open(decodeURIComponent(m[1])).catch((e) => flash(e.message));
    return;
  }
  taskView.close();
  if (hash === '#/events') {
    $('view-events').hidden = false;
    logRender(true);
  } else if (hash === '#/approvals') {
    $('view-approvals').hidden = false;
    approvals.load().catch((e) => flash(e.message));
  } else if (hash === '#/charts') {
    $('view-charts').hidden = false;
    charts.load().catch((e) => flash(e.message));
  } else {
    $('view-tasks').hidden = false;
    tasksView.load().catch((e) => flash(e.message));
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
    // the document is public: the task list is what proves the token (tasks:read)
    const [doc] = await Promise.all([api('/docs/openapi.json'), api('/tasks?limit=1')]);
    const statusParam = doc.paths['/tasks'].get.parameters.find((p) => p.name === 'status');
    const select = $('task-status');
    select.replaceChildren(
      el('option', { value: '' }, 'any'),
      ...(statusParam?.schema?.enum ?? []).map((s) => el('option', { value: s }, s)),
    );
  } catch (e) {
    if (!token) return;
    return signOut(e.message);
  }
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  live.connect();
  logStart().catch((e) => flash(`event log: ${e.message}`));
  approvals.load().catch((e) => flash(`approvals: ${e.message}`));
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
$('task-status').addEventListener('change', () => tasksView.reset());
let filterTimer = null;
for (const id of ['task-session', 'task-q'])
  $(id).addEventListener('input', () => {
    // one request once typing pauses, not one per key
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => tasksView.reset(), 250);
  });
$('charts-days').addEventListener('change', () => charts.load().catch((e) => flash(e.message)));
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
$('t-more').addEventListener('click', () => taskView.showEarlier());
$('t-timeline').addEventListener('click', async (ev) => {
  const button = ev.target.closest('button.fork');
  if (!button) return;
  const at_sequence = Number(button.closest('li').dataset.seq);
  try {
    const fork = await api(`/tasks/${encodeURIComponent(taskView.id)}/fork`, {
      method: 'POST',
      body: { at_sequence },
    });
    location.hash = `#/tasks/${encodeURIComponent(fork.task_id)}`;
  } catch (e) {
    flash(e.message);
  }
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
