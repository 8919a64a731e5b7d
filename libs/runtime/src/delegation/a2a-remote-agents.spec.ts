import { Part, Task, TaskState } from '@a2a-js/sdk';
import { artifactPartText, remoteSnapshotOf } from './a2a-remote-agents';

const part = (content: Part['content'], extra: Partial<Part> = {}): Part => ({
  content,
  metadata: undefined,
  filename: '',
  mediaType: '',
  ...extra,
});

describe('a remote task as its parent records it', () => {
  it('keeps every kind of artifact part: text, data as JSON, a file by name and size or URL (never its bytes)', () => {
    expect(artifactPartText(part({ $case: 'text', value: 'hello' }))).toBe('hello');
    expect(artifactPartText(part({ $case: 'data', value: { rows: 2 } }))).toBe('{"rows":2}');
    expect(
      artifactPartText(
        part({ $case: 'raw', value: Buffer.from('abc') }, { filename: 'a.png', mediaType: 'image/png' }),
      ),
    ).toBe('[file a.png (image/png, 3 bytes)]');
    expect(
      artifactPartText(part({ $case: 'url', value: 'https://x/report.pdf' }, { filename: 'report.pdf' })),
    ).toBe('[file report.pdf (unknown type) at https://x/report.pdf]');
  });

  it('a completed task with a data artifact: its JSON is the text the parent gets', () => {
    const task: Task = {
      id: 'rt1',
      contextId: 'ctx',
      status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: undefined },
      artifacts: [
        {
          artifactId: 'a1',
          name: 'answer',
          description: '',
          parts: [part({ $case: 'text', value: 'found' }), part({ $case: 'data', value: { count: 3 } })],
          metadata: undefined,
          extensions: [],
        },
      ],
      history: [],
      metadata: undefined,
    };
    expect(remoteSnapshotOf(task)).toMatchObject({
      state: 'completed',
      artifacts: [{ artifact_id: 'a1', name: 'answer', text: 'found\n{"count":3}' }],
    });
  });
});
