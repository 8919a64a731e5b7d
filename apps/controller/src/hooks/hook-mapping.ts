import { UserTask, ValidationError } from '@runledger/contracts';
import type { InboundHookConfig } from './hook-config';
import { PLACEHOLDER } from './hook-template';

/** A verified delivery as the mapping reads it: its JSON body, its headers (lower-case names), its id. */
export interface HookDelivery {
  hook: string;
  delivery_id: string;
  body: unknown;
  headers: Readonly<Record<string, string>>;
}

/** What a delivery comes to. */
export type HookAction =
  | { action: 'ignored' }
  | { action: 'task'; task: UserTask }
  | { action: 'signal'; task_id: string; name: string; payload: unknown };

const TASK_ID = /^task_[A-Za-z0-9_-]{1,195}$/;

/** The value at a path of the delivery (`body.items.0.id`, `headers.x-github-event`); undefined when absent. */
export function valueAt(d: HookDelivery, path: string): unknown {
  const [root, ...rest] = path.split('.');
  if (root === 'delivery_id') return d.delivery_id;
  if (root === 'hook') return d.hook;
  if (root === 'headers') return rest.length === 0 ? d.headers : d.headers[rest[0].toLowerCase()];
  let value: unknown = d.body;
  for (const key of rest) {
    if (value === null || typeof value !== 'object' || !Object.prototype.hasOwnProperty.call(value, key))
      return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

const asText = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

/** The template with each placeholder replaced by its value (text as is, anything else as JSON); `missing` collects the paths a delivery lacks. */
function fill(template: string, d: HookDelivery, field: string, missing: string[]): string {
  return template.replace(PLACEHOLDER, (_all, path: string) => {
    const value = valueAt(d, path);
    if (value === undefined) {
      missing.push(`${field}: {{${path}}}`);
      return '';
    }
    return asText(value);
  });
}

/** Whether the delivery has every value `when` asks for (a list: any of them). */
export function matchesWhen(when: InboundHookConfig['when'], d: HookDelivery): boolean {
  return Object.entries(when ?? {}).every(([path, wanted]) => {
    const value = valueAt(d, path);
    if (value === undefined || (value !== null && typeof value === 'object')) return false;
    const text = String(value);
    return Array.isArray(wanted) ? wanted.includes(text) : wanted === text;
  });
}

/**
 * What the hook's configuration makes of a delivery. A value the delivery lacks is a ValidationError
 * naming every missing placeholder, before anything is written.
 */
export function mapDelivery(hook: InboundHookConfig, d: HookDelivery): HookAction {
  if (!matchesWhen(hook.when, d)) return { action: 'ignored' };
  const missing: string[] = [];
  let action: HookAction;
  if (hook.task) {
    const { input, session_id, budgets, on_busy } = hook.task;
    action = {
      action: 'task',
      task: {
        input: fill(input, d, 'task.input', missing),
        ...(session_id ? { session_id: fill(session_id, d, 'task.session_id', missing) } : {}),
        ...(budgets ? { budgets } : {}),
        ...(on_busy ? { on_busy } : {}),
      },
    };
  } else {
    const signal = hook.signal!;
    const payload = valueAt(d, signal.payload);
    if (payload === undefined) missing.push(`signal.payload: ${signal.payload}`);
    action = {
      action: 'signal',
      task_id: fill(signal.task_id, d, 'signal.task_id', missing),
      name: fill(signal.name, d, 'signal.name', missing),
      payload: payload ?? null,
    };
  }
  if (missing.length > 0)
    throw new ValidationError(`the delivery lacks what hook ${hook.name} maps: ${missing.join(', ')}`, {
      hook: hook.name,
      missing,
    });
  // a signal goes to a task's stream only, never to another stream a delivery might name
  if (action.action === 'signal' && !TASK_ID.test(action.task_id))
    throw new ValidationError(
      `hook ${hook.name}: ${JSON.stringify(action.task_id.slice(0, 100))} is not a task id`,
      {
        hook: hook.name,
        field: 'signal.task_id',
      },
    );
  return action;
}
