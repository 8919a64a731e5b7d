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

/** A headline figure of `npm run bench`: what was measured, its ratio to the baseline of the same run, and its target. */
export interface Figure {
  figure: string;
  value: string;
  /** to the baseline measured in the same run; null for an absolute figure */
  ratio: number | null;
  target: string;
  met: boolean;
}

const figures: Figure[] = [];

/** Keeps a figure for the summary printed at the end of the run (printFigures). */
export function recordFigure(f: Figure): void {
  figures.push(f);
}

/** The figures recorded in this run, one table row each, with whether each met its target. */
export function printFigures(): void {
  if (figures.length === 0) return;
  console.log('\n== summary: every figure of this run, its ratio and its target ==');
  console.log('| figure | value | ratio | target | met |');
  console.log('|---|---|---|---|---|');
  for (const f of figures)
    console.log(
      `| ${f.figure} | ${f.value} | ${f.ratio === null ? '-' : `${fmt(f.ratio, 2)}x`} | ${f.target} | ${f.met ? 'yes' : 'NO'} |`,
    );
}
