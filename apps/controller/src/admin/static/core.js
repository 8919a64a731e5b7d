// The pieces every page uses: the API with the operator's token, the one live WebSocket, formatting.

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

/** The operator's token, and what to do when the server rejects it (the app signs out). */
const auth = { token: sessionStorage.getItem(TOKEN_KEY), onRejected: (_message) => {} };

async function api(path, { method = 'GET', body } = {}) {
  const headers = { Authorization: `Bearer ${auth.token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const isJson = (res.headers.get('content-type') || '').includes('json');
  const data = isJson ? await res.json() : await res.text();
  if (res.status === 401) auth.onRejected('The server rejected the token.');
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
    ws.onopen = () => ws.send(JSON.stringify({ type: 'auth', token: auth.token }));
    ws.onmessage = (m) => this.onMessage(JSON.parse(m.data));
    ws.onclose = (e) => {
      setConn(false);
      if (this.ws !== ws) return;
      this.ws = null;
      this.authed = false;
      if (e.code === 4401) return auth.onRejected('The server rejected the token.');
      setTimeout(() => auth.token && this.connect(), this.backoff);
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
/** A task list's first cell: the input's first line linking to the task, and its id. */
const taskCell = (t) =>
  el(
    'td',
    { class: 'input', title: `${t.input_first_line}\n${t.task_id}` },
    el('a', { href: taskHref(t.task_id) }, t.input_first_line || '(no input)'),
    el('code', {}, t.task_id),
  );
/** What a task's `waiting_for` (GET /tasks/:id) says it waits for, in words. */
const waitingText = (w) =>
  !w
    ? ''
    : w.kind === 'timer'
      ? `a timer, due ${w.due_at}`
      : w.kind === 'turn'
        ? `its turn in the session, after task ${w.after_task_id}`
        : `signal ${w.name}${w.due_at ? `, at most until ${w.due_at}` : ''}`;
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

export { $, INBOX_EVENTS, LOG_CAP, OLDER_PAGES, PAGE, ROW, SVG_NS, TERMINAL, TERMINAL_EVENTS, TOKEN_KEY, api, auth, coalesced, el, flash, fmtAge, fmtCost, fmtDuration, live, statusBadge, summarize, svgAdd, taskCell, taskDuration, taskHref, waitingText };
