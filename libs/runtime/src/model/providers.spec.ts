import { EventLogBuilder } from '../discipline/testing-events';
import { OpenAiBackend } from './openai-backend';
import {
  LabelledBackend,
  chainStart,
  duplicateLabel,
  providerLabel,
  recordedProviderLabels,
} from './providers';
import { ScriptedBackend } from './scripted-backend';

type Guard = { guard: 'fallback' | 'retry'; data: Record<string, unknown> };
const guardEvents = (guards: Guard[]) =>
  guards.reduce(
    (log, g) => log.add('GUARD_TRIGGERED', { guard: g.guard, round: 1, detail: g.guard, data: g.data }),
    new EventLogBuilder().received(),
  ).events;

const fallback = (from: string, to: string, role?: string) => ({
  guard: 'fallback' as const,
  data: { ...(role ? { role } : {}), from, to },
});
const retry = (provider: string) => ({ guard: 'retry' as const, data: { provider } });

describe('providerLabel', () => {
  it('names the model and the host, never credentials, path or query', () => {
    expect(providerLabel('gpt-a', 'https://user:secret@api.example.com:8443/v1?key=abc')).toBe(
      'gpt-a@api.example.com:8443',
    );
  });

  it('is the model alone without a base URL', () => {
    expect(providerLabel('gpt-a')).toBe('gpt-a');
    expect(providerLabel('gpt-a', null)).toBe('gpt-a');
  });

  it('an OpenAI backend is labelled from its orchestrator model and base URL unless named', () => {
    const models = { orchestrator: 'm1', coder: 'm2' };
    expect(new OpenAiBackend({ baseURL: 'http://127.0.0.1:9/v1', apiKey: 'k', models }).label).toBe(
      'm1@127.0.0.1:9',
    );
    expect(new OpenAiBackend({ apiKey: 'k', models, label: 'backup' }).label).toBe('backup');
  });
});

describe('LabelledBackend', () => {
  it('answers as the backend it wraps under another label', async () => {
    const inner = new ScriptedBackend({ orchestrator: ['hi'] }, { backend: 'replay' });
    const sut = new LabelledBackend(inner, 'gpt-b@host');
    expect(sut.label).toBe('gpt-b@host');
    expect(sut.backend).toBe('replay');
    expect(sut.modelFor('orchestrator')).toBe('replay');
    expect(sut.modelFor('coder')).toBeNull();
    await expect(
      sut.complete({ role: 'orchestrator', messages: [], timeout_ms: 100 }),
    ).resolves.toMatchObject({
      content: 'hi',
    });
  });
});

describe('duplicateLabel', () => {
  it('finds a label used twice, null when all differ', () => {
    const a = new ScriptedBackend({}, { backend: 'a' });
    const b = new ScriptedBackend({}, { backend: 'b' });
    expect(duplicateLabel([a, b])).toBeNull();
    expect(duplicateLabel([a, b, new LabelledBackend(b, 'a')])).toBe('a');
  });
});

describe('chainStart', () => {
  const labels = ['A', 'B', 'C'];

  it('starts at the primary when the task never switched', () => {
    expect(chainStart(labels, guardEvents([retry('A')]), 'orchestrator')).toBe(0);
  });

  it('stays on the provider the task switched to last', () => {
    expect(chainStart(labels, guardEvents([fallback('A', 'B')]), 'orchestrator')).toBe(1);
    expect(chainStart(labels, guardEvents([fallback('A', 'B'), fallback('B', 'C')]), 'orchestrator')).toBe(2);
  });

  it('a switch to sys_util, to an unknown label or of another role moves nothing', () => {
    const events = guardEvents([fallback('A', 'sys_util'), fallback('A', 'Z'), fallback('A', 'C', 'coder')]);
    expect(chainStart(labels, events, 'orchestrator')).toBe(0);
    expect(chainStart(labels, events, 'coder')).toBe(2);
  });
});

describe('recordedProviderLabels', () => {
  it('lists the providers retries and fallbacks named, primary first, without sys_util', () => {
    const events = guardEvents([
      retry('A'),
      retry('A'),
      fallback('A', 'B'),
      retry('B'),
      fallback('B', 'sys_util'),
      fallback('B', 'C'),
    ]);
    expect(recordedProviderLabels(events)).toEqual(['A', 'B', 'C']);
  });

  it('is empty for a task that never retried nor fell back, and for a fallback without a provider', () => {
    expect(recordedProviderLabels(guardEvents([]))).toEqual([]);
    expect(recordedProviderLabels(guardEvents([{ guard: 'fallback', data: { to: 'sys_util' } }]))).toEqual(
      [],
    );
  });
});
