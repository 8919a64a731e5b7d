import {
  EventPayload,
  NewEvent,
  RuntimeEvent,
  TodoCallArgs,
  TodoItem,
  TodoOwner,
  TodoSpec,
  TodoStatus,
  TodoUpdateArgs,
  isTerminalTodoStatus,
} from '@runledger/contracts';

/**
 * A task's todos, folded from TODO_ADDED / TODO_UPDATED. Todos belong to the task that added them, so
 * a session's next task starts with none. The current plan is the latest plan that declared todos:
 * its todos, and todos added by a tool call after it started, are the active ones; those of an
 * earlier plan (or added before it) are never inherited. With no plan, every added todo is active.
 */
export interface TodoState {
  /** by id, in the order first added (a later plan that declares an id again replaces it) */
  readonly items: Map<string, TodoEntry>;
  /** the plan whose todos are current, and the sequence its first todo was added at */
  readonly plan: { plan_id: string; since: number } | null;
  /** the runtime reminded the task to create its todos (GUARD_TRIGGERED todo_reminder) */
  readonly reminded: boolean;
}

export interface TodoEntry {
  id: string;
  text: string;
  required: boolean;
  status: TodoStatus;
  note: string | null;
  owner: TodoOwner;
  /** the sequence of its TODO_ADDED */
  added: number;
}

export const TODO_REMINDER =
  'This request asks for a change: before working on it, list its todos (a plan with "todos", or the todo tool with op "add"), then move each along as you go. Todos of earlier tasks are not carried over.';

/** The JSON protocol's todo tool: moves a todo along. */
export const TODO_UPDATE_TOOL = 'todo_update';
/** Native tool calling's todo function: adds (`op: add`) or moves along (`op: update`) a todo. */
export const TODO_FUNCTION = 'runledger_todo';
export const isTodoTool = (tool: string): boolean => tool === TODO_UPDATE_TOOL || tool === TODO_FUNCTION;

export const initialTodoState = (): TodoState => ({ items: new Map(), plan: null, reminded: false });

/** evolve: one event into the todo state (a new state when it changes; the maps are not shared). */
export function todoEvolve(state: TodoState, e: RuntimeEvent): TodoState {
  switch (e.type) {
    case 'TODO_ADDED': {
      const { owner } = e.payload;
      const items = new Map(state.items);
      items.set(e.payload.todo_id, {
        id: e.payload.todo_id,
        text: e.payload.text,
        required: e.payload.required,
        status: 'pending',
        note: null,
        owner,
        added: e.sequence,
      });
      const plan =
        owner.kind === 'plan' && owner.plan_id !== state.plan?.plan_id
          ? { plan_id: owner.plan_id, since: e.sequence }
          : state.plan;
      return { ...state, items, plan };
    }
    case 'TODO_UPDATED': {
      const prev = state.items.get(e.payload.todo_id);
      if (!prev) return state;
      const items = new Map(state.items);
      items.set(prev.id, { ...prev, status: e.payload.status, note: e.payload.note ?? prev.note });
      return { ...state, items };
    }
    case 'GUARD_TRIGGERED':
      return e.payload.guard === 'todo_reminder' ? { ...state, reminded: true } : state;
    default:
      return state;
  }
}

export const todoStateFromEvents = (events: readonly RuntimeEvent[]): TodoState =>
  events.reduce(todoEvolve, initialTodoState());

/** A todo counts now: owned by the current plan, or added by a tool call after it started (or there is no plan). */
export function isActive(state: TodoState, t: TodoEntry): boolean {
  if (!state.plan) return true;
  if (t.owner.kind === 'plan') return t.owner.plan_id === state.plan.plan_id;
  return t.added > state.plan.since;
}

/** The todos as the API and the prompt show them, in the order added. */
export const todoList = (state: TodoState): TodoItem[] =>
  [...state.items.values()].map((t) => ({
    id: t.id,
    text: t.text,
    required: t.required,
    status: t.status,
    note: t.note,
    owner: t.owner,
    active: isActive(state, t),
  }));

const activeEntries = (state: TodoState): TodoEntry[] =>
  [...state.items.values()].filter((t) => isActive(state, t));

/** Active todos not done or cancelled yet. */
export const openTodos = (state: TodoState): TodoEntry[] =>
  activeEntries(state).filter((t) => !isTerminalTodoStatus(t.status));

/** Todos are part of this task (some were added, or the runtime asked for them): the todo tool is offered. */
export const todosInPlay = (state: TodoState, settingOn: boolean): boolean =>
  settingOn || state.reminded || state.items.size > 0;

/** `- [status] id (optional): text` per open todo, for reminders. */
export const openTodoLines = (state: TodoState): string =>
  openTodos(state)
    .map((t) => `- [${t.status}] ${t.id}${t.required ? '' : ' (optional)'}: ${t.text}`)
    .join('\n');

/** The prompt's Todos section: the active todos with their status, or how to create them when there are none. */
export function todoSection(state: TodoState): string {
  const active = activeEntries(state);
  if (active.length === 0 && state.reminded) return TODO_REMINDER;
  if (active.length === 0)
    return 'No todos yet. For work of several parts, list them first: a plan with "todos": [{"id","text","required"}] or the todo tool with op "add".';
  return [
    ...active.map(
      (t) =>
        `- [${t.status}] ${t.id}${t.required ? '' : ' (optional)'}: ${t.text}${t.note ? ` (note: ${t.note})` : ''}`,
    ),
    'Move each todo along with the todo tool as you work; the task is accepted only when every required todo is done (or cancelled with a note).',
  ].join('\n');
}

/** What the JSON protocol's tool list says of todo_update. */
export const TODO_UPDATE_LINE = `- ${TODO_UPDATE_TOOL}: move one of the task's todos along (cancelled needs a note)\n  args: {"id":"<todo id>","status":"pending|in_progress|done|cancelled","note":"<why, optional>"}`;

/** Plan todos as TODO_ADDED events, in the order declared. */
export const planTodoEvents = (plan_id: string, todos: readonly TodoSpec[]): NewEvent[] =>
  todos.map((t) => ({
    type: 'TODO_ADDED' as const,
    payload: {
      todo_id: t.id,
      text: t.text,
      required: t.required,
      owner: { kind: 'plan', plan_id },
      call_id: null,
    },
  }));

export type TodoCallDecision =
  | { ok: true; events: NewEvent[]; output: { todo: string; status: TodoStatus; open: string[] } }
  | { ok: false; error: string };

const issues = (e: { issues: { path: PropertyKey[]; message: string }[] }) =>
  e.issues.map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`).join('; ');

const activeIds = (state: TodoState): string =>
  activeEntries(state)
    .map((t) => t.id)
    .join(', ') || '(none)';

/**
 * A call of the todo tool against the task's todos: the events it records, or why it is refused.
 * An id that is not an active todo fails with todo_not_found and the active ids, so the model can
 * correct itself at once; a cancelled todo needs a note.
 */
export function decideTodoCall(
  state: TodoState,
  tool: string,
  args: Record<string, unknown>,
  at: { round: number; call_id: string },
): TodoCallDecision {
  const parsed =
    tool === TODO_UPDATE_TOOL
      ? TodoUpdateArgs.safeParse(args)
      : TodoCallArgs.safeParse(args.op === undefined ? { op: 'update', ...args } : args);
  if (!parsed.success) return { ok: false, error: `invalid todo arguments: ${issues(parsed.error)}` };
  const call = { op: 'update' as const, ...parsed.data } as TodoCallArgs;
  const openIds = openTodos(state).map((t) => t.id);
  if (call.op === 'add') {
    const existing = state.items.get(call.id);
    if (existing && isActive(state, existing))
      return {
        ok: false,
        error: `todo_exists: ${call.id} is already a todo; active ids: ${activeIds(state)}`,
      };
    const added: EventPayload<'TODO_ADDED'> = {
      todo_id: call.id,
      text: call.text,
      required: call.required,
      owner: { kind: 'round', round: at.round },
      call_id: at.call_id,
    };
    return {
      ok: true,
      events: [{ type: 'TODO_ADDED', payload: added }],
      output: { todo: call.id, status: 'pending', open: [...openIds, call.id] },
    };
  }
  const todo = state.items.get(call.id);
  if (!todo || !isActive(state, todo))
    return { ok: false, error: `todo_not_found: no active todo ${call.id}; active ids: ${activeIds(state)}` };
  if (call.status === 'cancelled' && !call.note)
    return { ok: false, error: `todo_note_required: cancelling ${call.id} needs a note saying why` };
  return {
    ok: true,
    events: [
      {
        type: 'TODO_UPDATED',
        payload: { todo_id: call.id, status: call.status, note: call.note ?? null, call_id: at.call_id },
      },
    ],
    output: {
      todo: call.id,
      status: call.status,
      open: openIds.filter((id) => id !== call.id || !isTerminalTodoStatus(call.status)),
    },
  };
}

/**
 * The accept gate's todos_done result: passed when no required active todo is open; a cancelled
 * todo without a note (possible only in a log written by hand) counts as open. Null when the task
 * has no active todos and no check asked for them.
 */
export function judgeTodos(
  state: TodoState,
  check: { id: string; required: boolean } | null,
): { id: string; kind: 'todos_done'; required: boolean; passed: boolean; detail: string } | null {
  const active = activeEntries(state);
  if (active.length === 0 && !check) return null;
  const open = active.filter(
    (t) => t.required && (!isTerminalTodoStatus(t.status) || (t.status === 'cancelled' && !t.note)),
  );
  const id = check?.id ?? 'todos';
  const required = check?.required ?? true;
  if (open.length === 0)
    return {
      id,
      kind: 'todos_done',
      required,
      passed: true,
      detail: `every required todo is done (${active.length} active)`,
    };
  return {
    id,
    kind: 'todos_done',
    required,
    passed: false,
    detail: `required todo${open.length === 1 ? '' : 's'} not done: ${open.map((t) => `${t.id} (${t.status}: ${t.text})`).join('; ')}`,
  };
}
