// Runledger admin dashboard: plain ES modules, no build step. All data comes from the REST API and the
// /ws WebSocket with the operator's bearer token. This module signs in, routes between the pages and
// wires the controls that tie them together.
import { $, INBOX_EVENTS, TERMINAL_EVENTS, TOKEN_KEY, api, auth, el, flash, live } from './core.js';
import { log, logLoadOlder, logRefilter, logRender, logStart } from './event-log.js';
import { tasksView } from './tasks-page.js';
import { approvals } from './approvals-page.js';
import { taskView } from './task-page.js';
import { charts } from './charts-page.js';
import { TIME_EVENTS, schedules } from './schedules-page.js';

const VIEWS = ['view-tasks', 'view-task', 'view-approvals', 'view-schedules', 'view-charts', 'view-events'];

function route() {
  const hash = location.hash || '#/tasks';
  const m = /^#\/tasks\/(.+)$/.exec(hash);
  for (const v of VIEWS) $(v).hidden = true;
  $('nav-tasks').classList.toggle('active', hash.startsWith('#/tasks'));
  $('nav-approvals').classList.toggle('active', hash === '#/approvals');
  $('nav-schedules').classList.toggle('active', hash === '#/schedules');
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
  } else if (hash === '#/schedules') {
    $('view-schedules').hidden = false;
    schedules.load().catch((e) => flash(e.message));
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
  auth.token = null;
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
    if (!auth.token) return;
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
  auth.token = $('token-input').value.trim();
  $('token-input').value = '';
  sessionStorage.setItem(TOKEN_KEY, auth.token);
  void signIn();
});
$('logout').addEventListener('click', () => signOut(''));
$('submit-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = $('submit-input').value.trim();
  if (!input) return;
  try {
    // a person widens the round policy for this task: recorded in its TASK_RECEIVED as their decision
    const allow = $('submit-write').checked;
    const res = await api('/tasks', { method: 'POST', body: { input, ...(allow ? { allow_mutation: true } : {}) } });
    $('submit-input').value = '';
    $('submit-write').checked = false;
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
$('schedule-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  try {
    await schedules.create(ev.target);
  } catch (e) {
    flash(e.message);
  }
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
$('t-signal').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const name = $('t-signal-name').value.trim();
  const text = $('t-signal-payload').value.trim();
  let payload = null;
  try {
    payload = text ? JSON.parse(text) : null;
  } catch {
    flash('the payload is not JSON');
    return;
  }
  try {
    const sent = await api(
      `/tasks/${encodeURIComponent(taskView.id)}/signals/${encodeURIComponent(name)}`,
      { method: 'POST', body: { payload } },
    );
    flash(sent.taken_by ? `signal ${name} delivered` : `signal ${name} kept until the task waits for it`);
    $('t-signal-payload').value = '';
    await taskView.loadState();
  } catch (e) {
    flash(e.message);
  }
});
$('t-more').addEventListener('click', () => taskView.showEarlier());
$('t-widen').addEventListener('click', async () => {
  try {
    const fork = await api(`/tasks/${encodeURIComponent(taskView.id)}/fork`, {
      method: 'POST',
      body: { at_sequence: 1, allow_mutation: true },
    });
    location.hash = `#/tasks/${encodeURIComponent(fork.task_id)}`;
  } catch (e) {
    flash(e.message);
  }
});
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
auth.onRejected = signOut;
log.listeners.push((e) => {
  if (!$('view-tasks').hidden) tasksView.refreshSoon();
  if (INBOX_EVENTS.has(e.type)) approvals.refreshSoon();
  if (!$('view-charts').hidden && TERMINAL_EVENTS.has(e.type)) charts.refreshSoon();
  if (!$('view-schedules').hidden && TIME_EVENTS.has(e.type)) schedules.refreshSoon();
});

// The server prints the dashboard address with the token in the fragment (never sent to the server).
const fragment = /^#token=([^&]+)$/.exec(location.hash);
if (fragment) {
  auth.token = decodeURIComponent(fragment[1]);
  sessionStorage.setItem(TOKEN_KEY, auth.token);
  history.replaceState(null, '', `${location.pathname}#/tasks`);
}
if (auth.token) void signIn();
else signOut('');
