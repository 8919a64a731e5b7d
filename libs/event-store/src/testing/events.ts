import { NewEvent, emptyUsage } from '@runledger/contracts';

/** Small valid events for store tests. */
export const taskReceived = (over: Partial<NewEvent> = {}, sessionId = 'ses_test'): NewEvent =>
  ({ type: 'TASK_RECEIVED', payload: { input: 'do the thing', session_id: sessionId }, ...over }) as NewEvent;

export const outputChunk = (index: number, over: Partial<NewEvent> = {}): NewEvent =>
  ({
    type: 'OUTPUT_CHUNK',
    payload: { call_id: 'call_1', index, delta: `chunk ${index}` },
    ...over,
  }) as NewEvent;

export const taskCompleted = (result = 'done'): NewEvent =>
  ({
    type: 'TASK_COMPLETED',
    payload: { stop_reason: 'completed', detail: 'ok', usage: emptyUsage(), result },
  }) as NewEvent;

export const chunks = (n: number, from = 0): NewEvent[] =>
  Array.from({ length: n }, (_, i) => outputChunk(from + i));
