import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { Database } from '@runledger/event-store';
import { Kysely } from 'kysely';
import { StateStoreDatabase, StateStoreTables } from './schema';

/** A runledger process that has the database open. */
export interface RunledgerProcess {
  hostname: string;
  pid: number;
  started_at: string;
  command: string;
}

/** Start time of a live pid on Linux (from /proc), null where it cannot be read. */
function startedAtMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    const boot = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]);
    return Number.isFinite(ticks) && Number.isFinite(boot) ? boot * 1000 + (ticks * 1000) / 100 : null;
  } catch {
    return null;
  }
}

/** Whether the process that registered `p` on this host still runs (a pid reused since is not it). */
function isAlive(p: RunledgerProcess): boolean {
  try {
    process.kill(p.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  const started = startedAtMs(p.pid);
  return started === null || Math.abs(started - Date.parse(p.started_at)) < 5_000;
}

const SELF: RunledgerProcess = {
  hostname: hostname(),
  pid: process.pid,
  started_at: new Date(Date.now() - process.uptime() * 1000).toISOString(),
  command: process.argv.slice(1).join(' ').slice(0, 500),
};

/**
 * Which runledger processes have this database open, so a process can see
 * that another one may be running tasks before it resumes them (resuming a
 * task another process runs executes its calls twice). Rows of processes
 * that are gone are removed by whoever reads them.
 */
export class ProcessRegistry {
  /** registrations per database in this process: the row goes when the last one closes */
  private static readonly opened = new Map<string, number>();
  private readonly db: Kysely<StateStoreDatabase>;

  /** `database` names the database (its file, or URL and schema), so registrations on one are counted together */
  constructor(
    handle: { db: Kysely<Database> },
    private readonly database: string,
  ) {
    this.db = handle.db.withTables<StateStoreTables>();
  }

  get self(): RunledgerProcess {
    return SELF;
  }

  async register(): Promise<void> {
    ProcessRegistry.opened.set(this.database, (ProcessRegistry.opened.get(this.database) ?? 0) + 1);
    await this.db
      .insertInto('processes')
      .values(SELF)
      .onConflict((oc) =>
        oc.columns(['hostname', 'pid']).doUpdateSet({ started_at: SELF.started_at, command: SELF.command }),
      )
      .execute();
  }

  async unregister(): Promise<void> {
    const left = (ProcessRegistry.opened.get(this.database) ?? 1) - 1;
    if (left > 0) return void ProcessRegistry.opened.set(this.database, left);
    ProcessRegistry.opened.delete(this.database);
    await this.db
      .deleteFrom('processes')
      .where('hostname', '=', SELF.hostname)
      .where('pid', '=', SELF.pid)
      .execute();
  }

  /** Live runledger processes other than this one; rows of dead ones on this host are deleted. */
  async others(): Promise<RunledgerProcess[]> {
    const rows = await this.db.selectFrom('processes').selectAll().execute();
    const live: RunledgerProcess[] = [];
    for (const row of rows) {
      if (row.hostname === SELF.hostname && row.pid === SELF.pid) continue;
      if (row.hostname !== SELF.hostname || isAlive(row)) {
        live.push(row);
        continue;
      }
      await this.db
        .deleteFrom('processes')
        .where('hostname', '=', row.hostname)
        .where('pid', '=', row.pid)
        .where('started_at', '=', row.started_at)
        .execute();
    }
    return live;
  }
}
