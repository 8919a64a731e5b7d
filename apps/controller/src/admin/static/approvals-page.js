// The approvals inbox: every permission and secret request waiting for a person.
import { $, api, coalesced, el, flash, fmtAge, taskHref } from './core.js';

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

export { approvals, pendingCard };
