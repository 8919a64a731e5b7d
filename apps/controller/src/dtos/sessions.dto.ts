import { createZodDto } from './zod-dto';
import { z } from 'zod';
import { OnBusy, SessionBudget, SessionBudgetSetting, UserTask } from '@runledger/contracts';
import { TaskView } from '@runledger/runtime';
import { ListTasksQuery, TaskResponse } from './tasks.dto';

/** Any session id a task may be submitted with. */
export const SessionIdParam = UserTask.shape.session_id.unwrap();

/** GET /sessions/:session_id: a page of the session's tasks. */
export const SessionQuery = ListTasksQuery.pick({ limit: true, cursor: true }).strict();
export type SessionQuery = z.output<typeof SessionQuery>;
export class SessionQueryDto extends createZodDto(SessionQuery) {}

export const SessionTaskResponse = TaskResponse.pick({
  task_id: true,
  status: true,
  input_first_line: true,
  stop_reason: true,
  created_at: true,
  updated_at: true,
  duration_ms: true,
});

export const SessionOnBusy = OnBusy.nullable().describe(
  "the session's strategy for a message that arrives while a task of it is unfinished; null: none set (enqueue)",
);

/** PUT /sessions/:session_id */
export const ConfigureSessionBody = z.object({ on_busy: OnBusy }).strict();
export class ConfigureSessionDto extends createZodDto(ConfigureSessionBody) {}
export const SessionSettingsResponse = z.object({ session_id: z.string(), on_busy: SessionOnBusy });
export type SessionSettingsResponse = z.infer<typeof SessionSettingsResponse>;
export class SessionSettingsResponseDto extends createZodDto(SessionSettingsResponse) {}

export const SessionResponse = z.object({
  session_id: z.string(),
  on_busy: SessionOnBusy,
  tasks: z.array(SessionTaskResponse).describe('newest first'),
  next_cursor: z.string().nullable(),
  budget: SessionBudget.nullable().describe(
    "the session's budget across its tasks as a task received now would record it (null: none)",
  ),
});
export type SessionResponse = z.infer<typeof SessionResponse>;
export class SessionResponseDto extends createZodDto(SessionResponse) {}

/** PUT /sessions/:session_id/budget */
export const SessionBudgetBody = SessionBudgetSetting;
export class SessionBudgetDto extends createZodDto(SessionBudgetBody) {}
export const SessionBudgetResponse = z.object({ session_id: z.string(), budget: SessionBudget });
export type SessionBudgetResponse = z.infer<typeof SessionBudgetResponse>;
export class SessionBudgetResponseDto extends createZodDto(SessionBudgetResponse) {}

export const toSessionTaskResponse = (t: TaskView): z.infer<typeof SessionTaskResponse> => ({
  task_id: t.task_id,
  status: t.status,
  input_first_line: t.input_first_line,
  stop_reason: t.stop_reason,
  created_at: t.created_at,
  updated_at: t.updated_at,
  duration_ms: t.duration_ms,
});
