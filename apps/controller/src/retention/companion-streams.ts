import { outboundStreamOf } from '../outbound/outbox';

/** What moves with a task when it is archived, and comes back with it: its outbound deliveries' stream. */
export const companionStreams = (taskId: string): string[] => [outboundStreamOf(taskId)];
