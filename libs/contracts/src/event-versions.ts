import { EventType } from './events';

/**
 * Event schema versions and the upcasters between them.
 *
 * A stored event keeps the payload shape it was written with, and its envelope says which one
 * (`schema_version`). When an event's payload shape changes incompatibly (a field renamed, split,
 * given another meaning), its version in EVENT_SCHEMA_VERSIONS goes up by one and an upcaster from
 * the previous version joins UPCASTERS: a small pure function from the old payload to the next
 * shape. Reading runs the chain from the stored version to today's, so a log written years ago folds
 * with today's code. A change that only adds an optional field (with a default) needs neither.
 *
 * The golden logs under libs/state-store/fixtures/event-logs prove it: they are replayed in the tests,
 * and a change to a payload's shape without an upcaster fails them.
 */

/** Every event type starts at version 1. */
export const FIRST_SCHEMA_VERSION = 1;

/** Today's version of the event types whose shape changed since version 1. */
const CHANGED_VERSIONS: Partial<Record<EventType, number>> = {};

/** One step of the chain: a payload at version `from` into the shape of version `from + 1`. Pure. */
export type Upcaster = (payload: Record<string, unknown>) => Record<string, unknown>;

/** Per event type, the upcaster that lifts a payload from each version (the key) to the next. */
export type UpcasterChains = Partial<Record<EventType, Readonly<Record<number, Upcaster>>>>;

export const UPCASTERS: UpcasterChains = {};

export interface EventVersioning {
  /** today's version of each event type that is past version 1 */
  readonly versions: Partial<Record<EventType, number>>;
  readonly upcasters: UpcasterChains;
}

export const CURRENT_EVENT_VERSIONING: EventVersioning = {
  versions: CHANGED_VERSIONS,
  upcasters: UPCASTERS,
};

/** The version an event of this type is written with today. */
export const currentSchemaVersion = (
  type: string,
  versioning: EventVersioning = CURRENT_EVENT_VERSIONING,
): number => versioning.versions[type as EventType] ?? FIRST_SCHEMA_VERSION;

export class MissingUpcasterError extends Error {
  constructor(
    readonly type: string,
    readonly from: number,
  ) {
    super(`no upcaster for ${type} from schema version ${from}`);
    this.name = new.target.name;
  }
}

/**
 * A stored payload in today's shape. Returns the payload itself when it is already current (the
 * common case: no copy), and leaves a payload from a newer version (written by newer code) as it is.
 * Throws MissingUpcasterError when a step of the chain is missing.
 */
export function upcastPayload(
  type: string,
  version: number,
  payload: unknown,
  versioning: EventVersioning = CURRENT_EVENT_VERSIONING,
): unknown {
  const target = currentSchemaVersion(type, versioning);
  if (version >= target) return payload;
  const chain = versioning.upcasters[type as EventType] ?? {};
  let lifted = payload as Record<string, unknown>;
  for (let v = version; v < target; v++) {
    const step = chain[v];
    if (!step) throw new MissingUpcasterError(type, v);
    lifted = step(lifted);
  }
  return lifted;
}

/**
 * A stored event in today's shape, its envelope saying the version it is served at. The same
 * object when nothing changes.
 */
export function upcastEvent<E extends { type: string; schema_version: number; payload: unknown }>(
  event: E,
  versioning: EventVersioning = CURRENT_EVENT_VERSIONING,
): E {
  const target = currentSchemaVersion(event.type, versioning);
  if (event.schema_version >= target) return event;
  return {
    ...event,
    payload: upcastPayload(event.type, event.schema_version, event.payload, versioning),
    schema_version: target,
  };
}
