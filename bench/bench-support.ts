/** Helpers the benchmarks share: number formatting, medians, and the event the event-store benches append. */
import { NewEvent, newId } from '@runledger/contracts';

/** `n` with thousands separators and exactly `digits` decimals. */
export const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The middle value (the mean of the two middle ones for an even count); 0 for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return 0;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** ~300 bytes of payload JSON: an OUTPUT_CHUNK of a benchmark stream. */
export const chunkPayload = (i: number) => ({
  call_id: 'call_bench',
  index: i,
  delta: `chunk ${i} `.padEnd(250, 'lorem ipsum dolor sit amet '),
});

export const chunkEvent = (i: number): NewEvent =>
  ({ type: 'OUTPUT_CHUNK', payload: chunkPayload(i) }) as NewEvent;

/**
 * The values of the events row a raw baseline inserts for chunk `sequence` of
 * `taskId`, in column order: event_id, task_id, session_id, sequence, type,
 * payload, causation_id, correlation_id, created_at.
 */
export const rawChunkRow = (taskId: string, sequence: number, createdAt: string): unknown[] => [
  newId('evt'),
  taskId,
  taskId,
  sequence,
  'OUTPUT_CHUNK',
  JSON.stringify(chunkPayload(sequence)),
  null,
  taskId,
  createdAt,
];
