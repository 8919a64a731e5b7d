import { TERMINAL_STATUSES, TaskStatus, ValidationError } from '@runledger/contracts';
import { z } from 'zod';

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `30d`, `12h`, `15m`, `90s`, `500ms` in milliseconds; ValidationError otherwise. */
export function parseDuration(text: string, field = 'duration'): number {
  const m = DURATION.exec(text.trim());
  if (!m) throw new ValidationError(`${field}: ${JSON.stringify(text)} is not a duration like 7d, 12h, 30m`);
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}

const FinishedStatus = z.enum(TERMINAL_STATUSES as [TaskStatus, ...TaskStatus[]]);

const RuleInput = z.strictObject({
  /** a finished task stays live this long after it ended */
  older_than: z.string(),
  /** the rule covers tasks that ended so (all finished statuses when absent) */
  status: z.array(FinishedStatus).min(1).optional(),
  /** the rule covers this session's tasks only */
  session_id: z.string().min(1).optional(),
  /** the rule covers tasks run as this agent profile only (delegation) */
  agent: z.string().min(1).optional(),
});

/** One rule: which finished tasks it covers, and how long they stay live. The first rule that covers a task decides. */
export interface RetentionRule {
  older_than_ms: number;
  status?: TaskStatus[];
  session_id?: string;
  agent?: string;
}

export interface RetentionPolicy {
  rules: RetentionRule[];
  /**
   * the second tier: tasks archived this long ago leave the live database for the archive's catalog
   * (their summary rows and archive records), so the live database stops growing. Absent: they stay.
   */
  catalog_after_ms?: number;
}

/** RUNLEDGER_RETENTION_CATALOG_AFTER's default: a month after archiving, a task's records leave the live database. */
export const DEFAULT_CATALOG_AFTER = '30d';

/** RUNLEDGER_RETENTION_CATALOG_AFTER: `off` (archived tasks keep their records live) or a duration. */
export function parseCatalogAfter(value: string = DEFAULT_CATALOG_AFTER): number | undefined {
  return value.trim() === 'off' ? undefined : parseDuration(value, 'RUNLEDGER_RETENTION_CATALOG_AFTER');
}

/**
 * RUNLEDGER_RETENTION: `off` (no policy), one duration (`7d`: every
 * finished task tree ended that long ago), or a JSON list of rules, first match decides:
 * `[{"older_than":"30d","status":["failed"]},{"older_than":"7d","agent":"researcher"},{"older_than":"90d"}]`.
 * A task no rule covers stays live. From a config file the list may be given as JSON itself.
 */
export function parseRetention(value: unknown, catalogAfter?: string): RetentionPolicy | null {
  if (value === undefined || value === null || value === 'off') return null;
  const catalog_after_ms = parseCatalogAfter(catalogAfter);
  const tier = catalog_after_ms === undefined ? {} : { catalog_after_ms };
  let rules: unknown = value;
  if (typeof value === 'string') {
    const text = value.trim();
    if (!text.startsWith('['))
      return { rules: [{ older_than_ms: parseDuration(text, 'RUNLEDGER_RETENTION') }], ...tier };
    try {
      rules = JSON.parse(text);
    } catch (err) {
      throw new ValidationError(`RUNLEDGER_RETENTION: not valid JSON (${(err as Error).message})`);
    }
  }
  const parsed = z.array(RuleInput).min(1).safeParse(rules);
  if (!parsed.success)
    throw new ValidationError(
      `RUNLEDGER_RETENTION: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  return {
    ...tier,
    rules: parsed.data.map((r, i) => ({
      older_than_ms: parseDuration(r.older_than, `RUNLEDGER_RETENTION[${i}].older_than`),
      ...(r.status ? { status: r.status } : {}),
      ...(r.session_id ? { session_id: r.session_id } : {}),
      ...(r.agent ? { agent: r.agent } : {}),
    })),
  };
}

/** What a rule looks at of a finished task. */
export interface RetentionSubject {
  status: string;
  session_id: string;
  agent: string | null;
  ended_at: string;
}

/** Whether the policy says the task may leave the live log at `now`. */
export function dueForArchive(policy: RetentionPolicy, task: RetentionSubject, now: number): boolean {
  const rule = policy.rules.find(
    (r) =>
      (!r.status || r.status.includes(task.status as TaskStatus)) &&
      (!r.session_id || r.session_id === task.session_id) &&
      (!r.agent || r.agent === task.agent),
  );
  return rule !== undefined && Date.parse(task.ended_at) <= now - rule.older_than_ms;
}

/**
 * The longest a policy keeps anything: streams that belong to no task (inbound hook receipts) stay
 * live this long, whatever became of what they started.
 */
export const longestAge = (policy: RetentionPolicy): number =>
  Math.max(...policy.rules.map((r) => r.older_than_ms));

/** The most a policy ever keeps a task of any kind: nothing that ended more recently is looked at. */
export const shortestAge = (policy: RetentionPolicy): number =>
  Math.min(...policy.rules.map((r) => r.older_than_ms));
