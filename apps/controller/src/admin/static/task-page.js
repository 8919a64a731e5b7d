// One task: its state, plan, pending requests and timeline, live.
import {
  $,
  PAGE,
  SVG_NS,
  TERMINAL,
  api,
  coalesced,
  el,
  fmtCost,
  live,
  statusBadge,
  summarize,
  svgAdd,
  taskDuration,
  taskHref,
  waitingText,
} from './core.js';
import { pendingCard } from './approvals-page.js';

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
    // round policy: whether the task may change things, who decided, and a way to widen it
    const intent = received?.payload.mutation_intent;
    $('t-changes-label').hidden = $('t-changes').hidden = !intent;
    $('t-changes-text').textContent = !intent
      ? ''
      : `${intent.allowed ? 'allowed' : 'not allowed'}: ${intent.reason} (${intent.decided_by === 'person' ? 'a person decided' : 'classified from the input'})`;
    $('t-widen').hidden = !intent || intent.allowed;
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
    $('t-signal').hidden = TERMINAL.has(t.status);
    const w = t.waiting_for;
    $('t-waiting-label').hidden = $('t-waiting').hidden = !w;
    $('t-waiting').textContent = waitingText(w);
    // a wait for a signal names it: the form is filled in for the person who sends it
    if (w?.kind === 'signal' && !$('t-signal-name').value) $('t-signal-name').value = w.name;
    this.renderPending(t);
    this.renderTodos(t);
    await this.renderTree(t);
  },
  /** the task's todos as GET /tasks/:id lists them: status, id, text, and why one was cancelled */
  renderTodos(t) {
    const todos = t.todos ?? [];
    if (!todos.length) return $('t-todos').replaceChildren(el('p', { class: 'muted' }, 'none'));
    $('t-todos').replaceChildren(
      el(
        'ul',
        { class: 'todos' },
        ...todos.map((d) =>
          el(
            'li',
            { class: `todo todo-${d.status}${d.active ? '' : ' muted'}` },
            el('span', { class: 'badge' }, d.status),
            ' ',
            el('code', {}, d.id),
            ` ${d.text}`,
            d.required ? '' : el('span', { class: 'muted' }, ' (optional)'),
            d.active ? '' : el('span', { class: 'muted' }, " (an earlier plan's)"),
            d.note ? el('span', { class: 'muted' }, ` — ${d.note}`) : '',
          ),
        ),
      ),
    );
  },
  /** the whole tree the task belongs to, from its root down, each task linked, this one marked */
  async renderTree(t) {
    const box = $('t-tree');
    const node = async (task, agent, depth) => {
      // a remote agent's task lives on its own service: shown with its address and id, not linked here
      if (task.remote)
        return el(
          'li',
          { 'data-task': task.task_id, class: 'remote' },
          el('span', { class: 'input' }, task.input_first_line || task.task_id),
          el('span', { class: 'agent' }, `(${agent}, remote)`),
          statusBadge(task.status),
          el(
            'span',
            { class: 'remote-where muted' },
            ' at ',
            el(
              'a',
              { href: task.remote.url, class: 'remote-url', rel: 'noopener', target: '_blank' },
              task.remote.url,
            ),
            task.remote.remote_task_id ? ` task ${task.remote.remote_task_id}` : ' (not heard of yet)',
          ),
        );
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

export { taskView };
