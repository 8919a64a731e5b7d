import { HOOK_RECEIPT_STREAM_PREFIX } from '../hooks/inbound-hooks';
import { OUTBOUND_STREAM_PREFIX } from '../outbound/outbox';

/** What moves with a task when it is archived, and comes back with it: the stream of its outbound deliveries. */
export const COMPANION_STREAM_PREFIXES = [OUTBOUND_STREAM_PREFIX];

export const companionStreams = (taskId: string): string[] =>
  COMPANION_STREAM_PREFIXES.map((prefix) => `${prefix}${taskId}`);

/**
 * Streams of no task that would otherwise stay live forever: inbound hook delivery receipts. One
 * receipt deduplicates a provider's redeliveries of one delivery, which come within minutes; it
 * moves on its own once older than the policy's longest age (an ignored delivery has no task to
 * follow), and is still read from the archive, so a very late redelivery is still answered from it.
 */
export const RECEIPT_STREAM_PREFIXES = [HOOK_RECEIPT_STREAM_PREFIX];
