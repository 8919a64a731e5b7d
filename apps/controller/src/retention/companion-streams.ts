import { OUTBOUND_STREAM_PREFIX } from '../outbound/outbox';

/** What moves with a task when it is archived, and comes back with it: the stream of its outbound deliveries. */
export const COMPANION_STREAM_PREFIXES = [OUTBOUND_STREAM_PREFIX];

export const companionStreams = (taskId: string): string[] =>
  COMPANION_STREAM_PREFIXES.map((prefix) => `${prefix}${taskId}`);
