import { createZodDto } from './zod-dto';
import { z } from 'zod';
import { UserTask } from '@runledger/contracts';
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

export const SessionResponse = z.object({
  session_id: z.string(),
  tasks: z.array(SessionTaskResponse).describe('newest first'),
  next_cursor: z.string().nullable(),
});
export type SessionResponse = z.infer<typeof SessionResponse>;
export class SessionResponseDto extends createZodDto(SessionResponse) {}

export const toSessionTaskResponse = (t: TaskView): z.infer<typeof SessionTaskResponse> => ({
  task_id: t.task_id,
  status: t.status,
  input_first_line: t.input_first_line,
  stop_reason: t.stop_reason,
  created_at: t.created_at,
  updated_at: t.updated_at,
  duration_ms: t.duration_ms,
});
