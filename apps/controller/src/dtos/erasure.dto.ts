import { createZodDto } from './zod-dto';
import { z } from 'zod';

const ErasureCounts = {
  session_id: z.string(),
  erased_at: z.string().describe('when the keys were destroyed (ISO 8601)'),
  key_destroyed: z
    .boolean()
    .describe(
      'false: an earlier erasure destroyed the keys; this one scrubbed the copies again and recorded nothing',
    ),
  task_ids: z.array(z.string()).describe('the erased tasks: live, archived and catalogued'),
  sealed_events: z.number().int().nonnegative().describe('live events sealed under the destroyed keys'),
  clear_events: z
    .number()
    .int()
    .nonnegative()
    .describe(
      "live events whose bytes stay readable in the database (stored in clear, or, for a tree, under its session's single key): served erased from now on",
    ),
  archived_events: z
    .number()
    .int()
    .nonnegative()
    .describe(
      "events in the archive's segments (archived or catalogued tasks) under the destroyed keys: served erased from now on",
    ),
  checkpoints_deleted: z.number().int().nonnegative(),
  memory_entries: z.number().int().nonnegative().describe('memory entries tombstoned and scrubbed'),
};

export const SessionErasureResponse = z.object(ErasureCounts);
export class SessionErasureResponseDto extends createZodDto(SessionErasureResponse) {}

export const TreeErasureResponse = z.object({
  ...ErasureCounts,
  root_task_id: z
    .string()
    .describe('the root of the erased tree (the task named, or its root when it is a child)'),
  streams: z
    .array(z.string())
    .describe("the streams whose keys were destroyed: the tree's tasks and their outbound deliveries"),
});
export class TreeErasureResponseDto extends createZodDto(TreeErasureResponse) {}
