import { Kysely, sql } from 'kysely';
import { EventHead, ReadAllOptions, ReadStreamOptions } from './event-store';
import { PreparedQuery } from './prepared-query';
import { EventRow } from './sqlite/rows';
import { Database } from './sqlite/schema';

/** The read queries every SQL adapter shares (kysely speaks each dialect); callers pick the columns. */

/** One task's events after `after_seq`, in sequence order. */
export const streamQuery = (db: Kysely<Database>, taskId: string, options: ReadStreamOptions) =>
  db
    .selectFrom('events')
    .where('task_id', '=', taskId)
    .where('sequence', '>', options.after_seq ?? 0)
    .orderBy('sequence')
    .$if(options.limit !== undefined, (q) => q.limit(options.limit!));

/** The global log after `after_position`, in position order, filtered by task and types. */
export const allQuery = (db: Kysely<Database>, options: ReadAllOptions) =>
  db
    .selectFrom('events')
    .where('position', '>', options.after_position ?? 0)
    .$if(options.task_id !== undefined, (q) => q.where('task_id', '=', options.task_id!))
    // an empty type list matches nothing (`IN (NULL)`), not everything
    .$if(options.types !== undefined, (q) =>
      q.where('type', 'in', options.types!.length > 0 ? [...options.types!] : [sql<string>`NULL`]),
    )
    .orderBy('position')
    .$if(options.limit !== undefined, (q) => q.limit(options.limit!));

/** allQuery's events without their payloads: the payload column is left unread. */
export const eventHeads = async (db: Kysely<Database>, options: ReadAllOptions): Promise<EventHead[]> =>
  (await allQuery(db, options).select(['position', 'sequence', 'task_id', 'type']).execute()) as EventHead[];

const streamRowsQuery = new PreparedQuery<
  Database,
  { task_id: string; after_seq: number; limit: number },
  EventRow
>(['task_id', 'after_seq', 'limit'], (db, v, shape) =>
  streamQuery(db, v.task_id, {
    after_seq: v.after_seq,
    limit: shape === 'limited' ? v.limit : undefined,
  }).selectAll(),
);

/** streamQuery's rows, every column, from a query compiled once per handle. */
export const streamRows = async (
  db: Kysely<Database>,
  taskId: string,
  options: ReadStreamOptions,
): Promise<EventRow[]> =>
  (
    await streamRowsQuery.execute(
      db,
      { task_id: taskId, after_seq: options.after_seq ?? 0, limit: options.limit ?? 0 },
      options.limit === undefined ? '' : 'limited',
    )
  ).rows;

const streamVersionQuery = new PreparedQuery<
  Database,
  { task_id: string },
  { version: number | string | null }
>(['task_id'], (db, v) =>
  db
    .selectFrom('events')
    .select((eb) => eb.fn.max('sequence').as('version'))
    .where('task_id', '=', v.task_id),
);

/** A stream's last sequence, 0 when it has no event. */
export async function streamVersion(db: Kysely<Database>, taskId: string): Promise<number> {
  const row = await streamVersionQuery.first(db, { task_id: taskId });
  return Number(row?.version ?? 0);
}
