// The task list page.
import { $, api, coalesced, el, flash, fmtAge, fmtCost, statusBadge, taskCell, taskDuration } from './core.js';

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
          taskCell(t),
          el('td', {}, statusBadge(t.status)),
          el('td', { title: t.stop_detail ?? t.stop_reason ?? '' }, t.stop_reason ?? ''),
          el('td', { class: 'num', title: new Date(t.created_at).toLocaleString() }, fmtAge(t.created_at)),
          el('td', { class: 'num' }, taskDuration(t)),
          el('td', { class: 'num' }, t.usage.total_tokens),
          el('td', { class: 'num' }, fmtCost(t.usage.cost_usd)),
          el(
            'td',
            { title: t.session_id },
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

export { tasksView };
