// The schedules page: every schedule (create, pause, resume, delete) and the tasks that wait for a time or a signal.
import { $, api, coalesced, el, flash, fmtAge, taskCell, taskHref, waitingText } from './core.js';

/** the events that change what this page shows */
const TIME_EVENTS = new Set([
  'SCHEDULE_CREATED',
  'SCHEDULE_PAUSED',
  'SCHEDULE_RESUMED',
  'SCHEDULE_DELETED',
  'SCHEDULE_FIRED',
  'TIMER_SET',
  'TIMER_FIRED',
  'SIGNAL_AWAITED',
  'SIGNAL_DELIVERED',
  'TASK_COMPLETED',
  'TASK_FAILED',
  'TASK_CANCELLED',
]);

const WAITING_SHOWN = 25;

const schedules = {
  async load() {
    await Promise.all([this.loadSchedules(), this.loadWaiting()]);
  },
  async loadSchedules() {
    const { schedules: all } = await api('/schedules');
    $('schedules-body').replaceChildren(...all.map((s) => this.row(s)));
    if (!all.length)
      $('schedules-body').append(el('tr', {}, el('td', { colspan: '7', class: 'muted' }, 'no schedules')));
  },
  row(s) {
    const act = (path, method = 'POST') => async () => {
      try {
        await api(`/schedules/${encodeURIComponent(s.schedule_id)}${path}`, { method });
        await this.loadSchedules();
      } catch (e) {
        flash(e.message);
      }
    };
    const last = s.last_slot
      ? [
          el('span', { class: `status ${s.last_outcome}` }, s.last_outcome),
          ` ${s.last_slot}`,
          ...(s.last_task_id ? [' ', el('a', { href: taskHref(s.last_task_id) }, 'task')] : []),
        ]
      : ['never'];
    return el(
      'tr',
      { 'data-schedule': s.schedule_id },
      el(
        'td',
        { class: 'input', title: `${s.input}\n${s.schedule_id}` },
        s.name ?? s.input.split('\n')[0],
        el('code', {}, s.schedule_id),
      ),
      el('td', {}, el('code', {}, s.cron), ` ${s.time_zone}`),
      el('td', {}, el('span', { class: `status ${s.paused ? 'paused' : 'active'}` }, s.paused ? 'paused' : 'active')),
      el('td', { class: 'next-slot' }, s.next_slot ?? '-'),
      el('td', { class: 'last-firing' }, ...last),
      el('td', { class: 'num' }, s.tasks_started),
      el(
        'td',
        {},
        el(
          'button',
          { type: 'button', class: s.paused ? 'resume' : 'pause', onclick: act(s.paused ? '/resume' : '/pause') },
          s.paused ? 'Resume' : 'Pause',
        ),
        ' ',
        el(
          'button',
          {
            type: 'button',
            class: 'delete',
            onclick: () => {
              if (confirm(`Delete schedule ${s.name ?? s.schedule_id}? Its tasks stay.`)) void act('', 'DELETE')();
            },
          },
          'Delete',
        ),
      ),
    );
  },
  /** the tasks waiting for a timer or a signal, newest first, each with what it waits for */
  async loadWaiting() {
    const { tasks } = await api(`/tasks?status=waiting&limit=${WAITING_SHOWN}`);
    const details = await Promise.all(tasks.map((t) => api(`/tasks/${encodeURIComponent(t.task_id)}`).catch(() => null)));
    $('waiting-body').replaceChildren(
      ...tasks.map((t, i) =>
        el(
          'tr',
          { 'data-task': t.task_id },
          taskCell(t),
          el('td', { class: 'waits-for' }, waitingText(details[i]?.waiting_for) || 'waiting'),
          el('td', { class: 'num', title: new Date(t.created_at).toLocaleString() }, fmtAge(t.created_at)),
          el('td', { title: t.session_id }, t.session_id),
        ),
      ),
    );
    if (!tasks.length)
      $('waiting-body').append(el('tr', {}, el('td', { colspan: '4', class: 'muted' }, 'no task waits')));
  },
  async create(form) {
    const value = (id) => $(id).value.trim();
    const body = {
      cron: value('sc-cron'),
      input: value('sc-input'),
      time_zone: value('sc-zone') || 'UTC',
      overlap: value('sc-overlap'),
      catch_up: value('sc-catch-up'),
      ...(value('sc-name') ? { name: value('sc-name') } : {}),
      ...(value('sc-session') ? { session_id: value('sc-session') } : {}),
    };
    const created = await api('/schedules', { method: 'POST', body });
    form.reset();
    flash(`schedule ${created.name ?? created.schedule_id} created: next slot ${created.next_slot}`);
    await this.loadSchedules();
  },
  refreshSoon: coalesced(500, () => schedules.load()),
};

export { TIME_EVENTS, schedules };
