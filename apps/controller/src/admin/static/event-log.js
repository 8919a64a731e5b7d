// The global event log page: every event in position order, virtualized, filtered, followed live.
import { $, LOG_CAP, OLDER_PAGES, PAGE, ROW, api, el, flash, live, summarize } from './core.js';

// ---------------------------------------------------------------- event log (virtualized)
const log = {
  events: [],
  filtered: [],
  selected: -1,
  started: false,
  types: new Set(),
  renderQueued: false,
  oldestLoaded: 0,
  /** called with each event appended live (the pages that refresh on it) */
  listeners: [],
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
  for (const listener of log.listeners) listener(e);
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

export { log, logLoadOlder, logRefilter, logRender, logStart };
