import { EventType, RuntimeEvent } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';

/**
 * "allow always" per session, as a projection of the permission events: a
 * PERMISSION_RESOLVED with `allow_always` grants its tool under the rule of the
 * TASK_AWAITING_PERMISSION it answered, for every task of that session.
 */
export interface AllowAlwaysState {
  /** session_id -> grant keys (tool + rule) */
  grants: Map<string, Set<string>>;
  /** request_id -> the session and rule of a prompt not answered yet */
  openRequests: Map<string, { session_id: string; rule: string | null }>;
}

export const PERMISSION_EVENT_TYPES: readonly EventType[] = [
  'TASK_AWAITING_PERMISSION',
  'PERMISSION_RESOLVED',
];

const grantKey = (tool: string, rule: string | null): string => JSON.stringify([tool, rule]);

export const emptyAllowAlways = (): AllowAlwaysState => ({ grants: new Map(), openRequests: new Map() });

/** evolve: one event into the grants. Mutates and returns `state` (the projection owns it). */
export function evolveAllowAlways(state: AllowAlwaysState, event: RuntimeEvent): AllowAlwaysState {
  switch (event.type) {
    case 'TASK_AWAITING_PERMISSION':
      state.openRequests.set(event.payload.request_id, {
        session_id: event.session_id,
        rule: event.payload.rule,
      });
      return state;
    case 'PERMISSION_RESOLVED': {
      const request = state.openRequests.get(event.payload.request_id);
      state.openRequests.delete(event.payload.request_id);
      // A resolution counts in the session of the prompt it answered, never in another one.
      if (!request || request.session_id !== event.session_id || event.payload.decision !== 'allow_always')
        return state;
      const session = state.grants.get(event.session_id) ?? new Set<string>();
      session.add(grantKey(event.payload.tool, request.rule));
      state.grants.set(event.session_id, session);
      return state;
    }
    default:
      return state;
  }
}

export const isAllowedAlways = (
  state: AllowAlwaysState,
  sessionId: string,
  tool: string,
  rule: string | null,
): boolean => state.grants.get(sessionId)?.has(grantKey(tool, rule)) ?? false;

/**
 * The allow_always projection kept beside the log. It is folded from the
 * store's permission events on first use (so it survives a restart) and then
 * only catches up on the permission events appended since the last look, by
 * global position: a grant made by a concurrent task of the same session,
 * through this process or another one sharing the store, is seen by the next
 * check without reading the log again.
 */
export class AllowAlwaysGrants {
  private readonly state = emptyAllowAlways();
  private appliedThrough = 0;
  private catchingUp: Promise<void> = Promise.resolve();

  constructor(private readonly store: EventStore) {}

  async isAllowed(sessionId: string, tool: string, rule: string | null): Promise<boolean> {
    await this.catchUp();
    return isAllowedAlways(this.state, sessionId, tool, rule);
  }

  /** Concurrent checks share one read at a time, so each event is applied once and in position order. */
  private catchUp(): Promise<void> {
    const run = this.catchingUp.then(async () => {
      const events = await this.store.readAll({
        after_position: this.appliedThrough,
        types: PERMISSION_EVENT_TYPES,
      });
      for (const event of events) {
        evolveAllowAlways(this.state, event);
        this.appliedThrough = event.position;
      }
    });
    this.catchingUp = run.catch(() => undefined);
    return run;
  }
}
