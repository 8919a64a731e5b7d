import { Scope } from '../auth/scopes';

const READ_METHODS = new Set([
  'GetTask',
  'ListTasks',
  'SubscribeToTask',
  'GetTaskPushNotificationConfig',
  'ListTaskPushNotificationConfigs',
  'GetExtendedAgentCard',
  // the same methods by their 0.3 names
  'tasks/get',
  'tasks/resubscribe',
  'tasks/pushNotificationConfig/get',
  'tasks/pushNotificationConfig/list',
  'agent/getAuthenticatedExtendedCard',
]);
const SEND_METHODS = new Set(['SendMessage', 'SendStreamingMessage', 'message/send', 'message/stream']);

const answersATask = (body: unknown): boolean => {
  const message = (body as { message?: { taskId?: unknown; task_id?: unknown } } | undefined)?.message;
  return Boolean(message?.taskId ?? message?.task_id);
};

/** The scope a JSON-RPC call needs: a message answering a waiting task needs `approvals`, a new one `tasks:write`. */
export function scopeOfJsonRpc(body: unknown): Scope {
  const { method, params } = (body ?? {}) as { method?: unknown; params?: unknown };
  if (typeof method === 'string' && SEND_METHODS.has(method))
    return answersATask(params) ? 'approvals' : 'tasks:write';
  return typeof method === 'string' && READ_METHODS.has(method) ? 'tasks:read' : 'tasks:write';
}

/** The same for the HTTP+JSON binding, by verb and path. */
export function scopeOfRest(method: string, path: string, body: unknown): Scope {
  if (/\/message:(send|stream)$/.test(path)) return answersATask(body) ? 'approvals' : 'tasks:write';
  return method === 'GET' ? 'tasks:read' : 'tasks:write';
}
