import { EventPayload, TERMINAL_STATUSES } from '@runledger/contracts';
import { Kysely, PostgresAdapter, RawBuilder, sql } from 'kysely';
import { StateStoreDatabase } from '../schema';
import { RetentionPolicy, dueForArchive, longestAge, shortestAge } from './retention-policy';

/** A finished task tree the policy lets go: the tasks, and every stream that moves with them. */
export interface PlannedTree {
  root_task_id: string;
  session_id: string;
  task_ids: string[];
  streams: string[];
  ended_at: string;
}

export interface SkippedTree {
  task_id: string;
  reason: string;
}

export interface ArchivePlan {
  trees: PlannedTree[];
  skipped: SkippedTree[];
  /**
   * where the next batch of the same run resumes the scan of finished tasks: what lies before it was
   * planned, skipped or not due (the cutoff and the clock are the run's). null: from the start.
   */
  resume: ScanState | null;
}

/** A place in the scan of finished tasks, in (created_at, task_id) order. */
export interface ScanCursor {
  created_at: string;
  task_id: string;
}

/**
 * Where a run's scan stands: the last task it read, and the tasks it read but did not decide on
 * (the batch filled before them), which the next batch takes first instead of reading them again.
 */
export interface ScanState {
  after: ScanCursor | null;
  pending: readonly Candidate[];
}

export interface Candidate {
  task_id: string;
  status: string;
  session_id: string;
  created_at: string;
  updated_at: string;
}

/** A batch of receipt streams the policy lets go, and where the next batch of the same run resumes. */
export interface ReceiptPlan {
  trees: PlannedTree[];
  /** the last stream looked at; null: none was */
  resume: string | null;
}

export type Db = Kysely<StateStoreDatabase>;

/** The first string past every string that starts with `prefix` (its last character moved on by one). */
const pastPrefix = (prefix: string): string =>
  prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);

export const isPostgres = (db: Db): boolean => db.getExecutor().adapter instanceof PostgresAdapter;

/** Page size of the candidate scan: finished tasks looked at per query. */
const SCAN_PAGE = 500;

interface ReceivedInfo {
  root_task_id: string;
  agent: string | null;
}

const receivedInfo = (taskId: string, payloadText: string): ReceivedInfo => {
  const p = JSON.parse(payloadText) as EventPayload<'TASK_RECEIVED'>;
  return { root_task_id: p.root_task_id ?? taskId, agent: p.agent?.name ?? null };
};

export const chunks = <T>(items: readonly T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

/**
 * Which finished task trees the policy lets go next: a page of finished tasks at a time (oldest end
 * first), each task's tree (root and delegated children, through TASK_RECEIVED.root_task_id), kept
 * out when a member has not finished or ended too recently, its session has a task not finished, or
 * a stream that moves with it (outbound deliveries) moved too recently. Reads only; the Archiver
 * moves what it plans, and re-checks inside its transaction.
 */
export class ArchivePlanner {
  private readonly batchTasks: number;
  private readonly companions: (taskId: string) => string[];
  /** finished tasks looked at per scan query: a few batches' worth, so a small batch plans cheaply */
  private readonly scanPage: number;

  private readonly receiptPrefixes: readonly string[];

  constructor(
    private readonly db: Db,
    options: {
      batchTasks: number;
      companionStreams: (taskId: string) => string[];
      receiptStreamPrefixes?: readonly string[];
    },
  ) {
    this.batchTasks = options.batchTasks;
    this.companions = options.companionStreams;
    this.receiptPrefixes = [...(options.receiptStreamPrefixes ?? [])].sort();
    this.scanPage = Math.min(SCAN_PAGE, Math.max(this.batchTasks * 2, 20));
  }

  /**
   * The next batch of trees the policy lets go, leaving out tasks in `exclude` (planned already),
   * scanning finished tasks from `from` (a previous plan's `resume` in the same run) on. The scan
   * reads each finished task once per run: a page the batch fills inside is carried to the next
   * batch from the first task whose tree did not fit, not read again.
   */
  async plan(
    conn: Db,
    policy: RetentionPolicy,
    now: number,
    exclude: ReadonlySet<string> = new Set(),
    from: ScanState | null = null,
  ): Promise<ArchivePlan> {
    const cutoff = new Date(now - shortestAge(policy)).toISOString();
    const trees: PlannedTree[] = [];
    const skipped: SkippedTree[] = [];
    const seenRoots = new Set<string>();
    let taskCount = 0;
    let after = from?.after ?? null;
    let pending = from?.pending ?? [];
    let scanEnded = false;
    while (taskCount < this.batchTasks) {
      let page: readonly Candidate[] = pending;
      pending = [];
      if (page.length === 0) {
        if (scanEnded) break;
        page = await this.finishedPage(conn, cutoff, after);
        if (page.length === 0) break;
        after = { created_at: page[page.length - 1].created_at, task_id: page[page.length - 1].task_id };
        scanEnded = page.length < this.scanPage;
      }
      const candidates = page.filter((c) => !exclude.has(c.task_id));
      const received = await this.received(
        conn,
        candidates.map((c) => c.task_id),
      );
      /** each root, with the first task of the page that brought it */
      const roots = new Map<string, string>();
      for (const c of candidates) {
        const info = received.get(c.task_id);
        if (!info) continue;
        if (seenRoots.has(info.root_task_id) || roots.has(info.root_task_id)) continue;
        if (!dueForArchive(policy, { ...c, agent: info.agent, ended_at: c.updated_at }, now)) continue;
        roots.set(info.root_task_id, c.task_id);
      }
      for (const tree of await this.trees(conn, [...roots.keys()], cutoff, skipped)) {
        // the batch is full inside this page: the next batch takes it on from the tree's first task
        if (taskCount > 0 && taskCount + tree.task_ids.length > this.batchTasks) {
          const first = roots.get(tree.root_task_id)!;
          const rest = page.slice(page.findIndex((c) => c.task_id === first));
          return { trees, skipped, resume: { after, pending: rest } };
        }
        seenRoots.add(tree.root_task_id);
        trees.push(tree);
        taskCount += tree.task_ids.length;
      }
      for (const r of roots.keys()) seenRoots.add(r);
    }
    return { trees, skipped, resume: { after, pending } };
  }

  /**
   * The next batch of receipt streams (streams of one event that belong to no task: an inbound
   * hook's delivery receipts) older than the policy's longest age, after `after` in stream order.
   * Each moves alone: a tree of no task whose one stream is the receipt. Only live streams have
   * events here, so an archived receipt is not looked at again.
   */
  async planReceipts(
    conn: Db,
    policy: RetentionPolicy,
    now: number,
    after: string | null,
  ): Promise<ReceiptPlan> {
    const cutoff = new Date(now - longestAge(policy)).toISOString();
    const trees: PlannedTree[] = [];
    let resume = after;
    for (const prefix of this.receiptPrefixes) {
      if (trees.length >= this.batchTasks) break;
      const from = resume !== null && resume >= prefix ? resume : null;
      // a range of the streams' (task_id, sequence) key; a receipt is never appended to after its first event
      const rows = await conn
        .selectFrom('events')
        .select(['task_id', 'session_id', 'created_at'])
        .where('task_id', from === null ? '>=' : '>', from ?? prefix)
        .where('task_id', '<', pastPrefix(prefix))
        .where('sequence', '=', 1)
        .where('created_at', '<=', cutoff)
        .orderBy('task_id')
        .limit(this.batchTasks - trees.length)
        .execute();
      for (const r of rows)
        trees.push({
          root_task_id: r.task_id,
          session_id: r.session_id,
          task_ids: [],
          streams: [r.task_id],
          ended_at: r.created_at,
        });
      if (rows.length > 0) resume = rows[rows.length - 1].task_id;
    }
    return { trees, resume };
  }

  /**
   * The next page of finished tasks not archived that ended before `cutoff`, after `after` in
   * (created_at, task_id) order. One query per finished status, each a range of the (status,
   * created_at) index: a task ends after it was created, so created_at <= cutoff bounds it too.
   * The tasks' `updated_at` has no index (every append moves it), so ordering by it was a sort of
   * every finished task per page.
   */
  private async finishedPage(conn: Db, cutoff: string, after: ScanCursor | null): Promise<Candidate[]> {
    const lists = await Promise.all(
      TERMINAL_STATUSES.map((status) =>
        conn
          .selectFrom('tasks as t')
          .select(['t.task_id', 't.status', 't.session_id', 't.created_at', 't.updated_at'])
          .where('t.status', '=', status)
          .where('t.created_at', '<=', cutoff)
          .$if(after !== null, (q) =>
            q
              .where('t.created_at', '>=', after!.created_at)
              .where((eb) =>
                eb.or([eb('t.created_at', '>', after!.created_at), eb('t.task_id', '>', after!.task_id)]),
              ),
          )
          .where('t.updated_at', '<=', cutoff)
          .where(({ not, exists, selectFrom }) =>
            not(
              exists(
                selectFrom('archived_tasks as a').select('a.task_id').whereRef('a.task_id', '=', 't.task_id'),
              ),
            ),
          )
          .orderBy('t.created_at')
          .orderBy('t.task_id')
          .limit(this.scanPage)
          .execute(),
      ),
    );
    return lists
      .flat()
      .sort((a, b) =>
        a.created_at === b.created_at
          ? a.task_id < b.task_id
            ? -1
            : 1
          : a.created_at < b.created_at
            ? -1
            : 1,
      )
      .slice(0, this.scanPage);
  }

  private async received(conn: Db, taskIds: readonly string[]): Promise<Map<string, ReceivedInfo>> {
    const out = new Map<string, ReceivedInfo>();
    for (const ids of chunks(taskIds, 500)) {
      if (ids.length === 0) continue;
      // a task's first event: found through the stream's (task_id, sequence) key, where a lookup by
      // type would walk every TASK_RECEIVED of the log
      const rows = await conn
        .selectFrom('events')
        .select(['task_id', 'type', 'payload'])
        .where('task_id', 'in', ids)
        .where('sequence', '=', 1)
        .execute();
      for (const r of rows)
        if (r.type === 'TASK_RECEIVED') out.set(r.task_id, receivedInfo(r.task_id, r.payload));
    }
    return out;
  }

  /** Each root's whole tree, when every task of it is finished and nothing that moves with it is still busy. */
  private async trees(
    conn: Db,
    roots: readonly string[],
    cutoff: string,
    skipped: SkippedTree[],
  ): Promise<PlannedTree[]> {
    if (roots.length === 0) return [];
    const rootOf: RawBuilder<string | null> = isPostgres(this.db)
      ? sql`(payload::jsonb ->> 'root_task_id')`
      : sql`json_extract(payload, '$.root_task_id')`;
    const members = new Map<string, Set<string>>(roots.map((r) => [r, new Set([r])]));
    for (const ids of chunks(roots, 500)) {
      // the partial index events_received_root: its condition literal (a bound parameter would not
      // match it), and named on SQLite, whose planner would rather take the index on type alone
      const from = isPostgres(this.db) ? sql`events` : sql`events INDEXED BY events_received_root`;
      const { rows } = await sql<{ task_id: string; root: string | null }>`SELECT task_id, ${rootOf} AS root
        FROM ${from} WHERE type = 'TASK_RECEIVED' AND ${rootOf} IN (${sql.join(ids)})`.execute(conn);
      for (const r of rows) if (r.root) members.get(r.root)?.add(r.task_id);
    }
    const all = [...members.values()].flatMap((s) => [...s]);
    const rows = new Map<string, { status: string; session_id: string; updated_at: string }>();
    for (const ids of chunks(all, 500))
      for (const r of await conn
        .selectFrom('tasks')
        .select(['task_id', 'status', 'session_id', 'updated_at'])
        .where('task_id', 'in', ids)
        .execute())
        rows.set(r.task_id, r);
    const sessions = [...new Set(roots.map((r) => rows.get(r)?.session_id).filter((s): s is string => !!s))];
    const busySessions = new Set<string>();
    for (const ids of chunks(sessions, 500))
      for (const r of await conn
        .selectFrom('tasks')
        .select('session_id')
        .distinct()
        .where('session_id', 'in', ids)
        .where('status', 'not in', [...TERMINAL_STATUSES])
        .execute())
        busySessions.add(r.session_id);
    const companions = all.flatMap((id) => this.companions(id));
    const companionLast = new Map<string, string>();
    for (const ids of chunks(companions, 500))
      for (const r of await conn
        .selectFrom('events')
        .select(['task_id', (eb) => eb.fn.max('created_at').as('last')])
        .where('task_id', 'in', ids)
        .groupBy('task_id')
        .execute())
        companionLast.set(r.task_id, String(r.last));

    const trees: PlannedTree[] = [];
    for (const [root, ids] of members) {
      const rootRow = rows.get(root);
      const taskIds = [...ids];
      const waiting = taskIds.find((id) => {
        const r = rows.get(id);
        return !r || !TERMINAL_STATUSES.includes(r.status as never);
      });
      if (!rootRow) {
        skipped.push({ task_id: root, reason: 'its root task has no row' });
        continue;
      }
      if (waiting) {
        skipped.push({ task_id: root, reason: `task ${waiting} of its tree has not finished` });
        continue;
      }
      if (busySessions.has(rootRow.session_id)) {
        skipped.push({ task_id: root, reason: `session ${rootRow.session_id} has a task not finished` });
        continue;
      }
      const late = taskIds.find((id) => rows.get(id)!.updated_at > cutoff);
      if (late) {
        skipped.push({ task_id: root, reason: `task ${late} of its tree ended too recently` });
        continue;
      }
      const streams = taskIds.flatMap((id) => this.companions(id)).filter((s) => companionLast.has(s));
      const busyCompanion = streams.find((s) => companionLast.get(s)! > cutoff);
      if (busyCompanion) {
        skipped.push({ task_id: root, reason: `stream ${busyCompanion} moved too recently` });
        continue;
      }
      trees.push({
        root_task_id: root,
        session_id: rootRow.session_id,
        task_ids: taskIds,
        streams: [...taskIds, ...streams],
        ended_at: rootRow.updated_at,
      });
    }
    return trees;
  }

  async countEvents(conn: Db, streams: readonly string[]): Promise<number> {
    let n = 0;
    for (const ids of chunks(streams, 500)) {
      const row = await conn
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('task_id', 'in', ids)
        .executeTakeFirst();
      n += Number(row?.n ?? 0);
    }
    return n;
  }
}
