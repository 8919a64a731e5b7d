import { Database } from '@runledger/event-store';
import type { Selectable } from 'kysely';

/** Row of `tasks`: JSON columns as text. */
export interface TasksTable {
  task_id: string;
  status: string;
  session_id: string;
  input: string;
  last_directive: string | null;
  pending_requests: string;
  stop_reason: string | null;
  stop_detail: string | null;
  result: string | null;
  usage: string;
  rounds: number;
  last_seq: number;
  idempotency_key: string | null;
  request_hash: string | null;
  accept_checks: string;
  budgets: string;
  created_at: string;
  updated_at: string;
}

export type TaskRow = Selectable<TasksTable>;

export interface CheckpointsTable {
  checkpoint_id: string;
  task_id: string;
  label: string;
  at_sequence: number;
  event_sequence: number;
  state: string;
  context: string;
  created_at: string;
}

export interface ProcessesTable {
  hostname: string;
  pid: number;
  started_at: string;
  command: string;
}

export interface TaskLeasesTable {
  task_id: string;
  owner: string;
  /** bigint columns come back as numbers from better-sqlite3 and as strings from pg */
  epoch: number | string;
  expires_at: number | string;
}

export interface ModelUsageTable {
  day: string;
  model: string;
  /** bigint columns come back as strings from pg */
  model_calls: number | string;
  prompt_tokens: number | string;
  completion_tokens: number | string;
  total_tokens: number | string;
  cost_usd: number;
}

/** This lib's tables, for `db.withTables<StateStoreTables>()` on the shared handle. */
export type StateStoreTables = {
  tasks: TasksTable;
  checkpoints: CheckpointsTable;
  processes: ProcessesTable;
  task_leases: TaskLeasesTable;
  model_usage: ModelUsageTable;
};

export type StateStoreDatabase = Database & StateStoreTables;
