import { RuntimeEvent } from '@runledger/contracts';
import type BetterSqlite3 from 'better-sqlite3';
import type { FoldedState } from './event-store';
import type { CopySealer } from './sealing/payload-sealer';

/**
 * A read model kept in the append transaction, so it never drifts from the
 * log: `apply` runs after the events are inserted and before the commit, on the
 * same connection; throwing rolls the whole append back. `copies` stores what the read model copies
 * of a session's content as the events' payloads are stored (sealed under the session's key when
 * erasure is on); absent for a store without a key store (:memory:), where everything is clear.
 */
export interface InlineProjection {
  /** a name for errors and logs */
  readonly name: string;
  /**
   * `folded`: the appender's fold of the events' task (AppendOptions.folded, given when every event
   * is as its writer folded it), for a projection that keeps the same fold to take as it is when its
   * own picture of the task stands at `folded.base`.
   */
  apply(
    raw: BetterSqlite3.Database,
    events: readonly RuntimeEvent[],
    copies?: CopySealer,
    folded?: FoldedState,
  ): void;
  /** empty the read model, before a rebuild refolds the whole log into it */
  reset(raw: BetterSqlite3.Database): void;
  /**
   * after a rebuild folded them: drop what the model keeps per task for these catalogued tasks (their
   * rows live in the archive's catalog, out of the live database); what they add up to stays
   */
  dropCatalogued?(raw: BetterSqlite3.Database, taskIds: readonly string[]): void;
}
