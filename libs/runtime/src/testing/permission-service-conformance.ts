import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PERMISSION_VERDICTS, PermissionCheck, PermissionVerdict, RuntimeEvent } from '@runledger/contracts';
import { PermissionService, PermissionSubject } from '@runledger/permissions';
import { ScriptedBackend } from '../model/scripted-backend';
import { replayView } from '../replay/replay-view';
import { replayTask } from '../runtime.module';
import { useTempStore } from './temp-store';
import { RecordingRuntimeLogger, startTestRuntime } from './test-runtime';
import { manifestOf, testToolRegistry } from './test-tools';

/** A call of one of the test registry's tools (testToolRegistry: echo, append_line, file_read, shell_exec). */
export interface PermissionDraw {
  tool: string;
  args: Record<string, unknown>;
}

export interface PermissionServiceUnderTest {
  sut: PermissionService;
  /**
   * For each verdict the adapter can give, a call it answers with that verdict as it is configured
   * here (a recording's replay never prompts: the person's answer is in the log).
   */
  draws: Partial<Record<PermissionVerdict, PermissionDraw>>;
}

/** The workspace's one file, which an allowed read finds. */
export const CONFORMANCE_FILE = 'in.txt';
const SESSION = 'sess_conformance';
/** the order a run meets the verdicts in: a hard stop ends the task, so it comes last */
const RUN_ORDER: PermissionVerdict[] = ['allow', 'prompt', 'deny', 'hard_stop'];

/**
 * What every PermissionService promises the runtime, given calls it is configured to answer with
 * each verdict (`make` gets the workspace root, holding CONFORMANCE_FILE):
 * - given such a call, when checked, then that verdict with a reason, and a rule for anything but an allow;
 * - a fresh instance given the same calls in the same order answers the same (a decision depends on
 *   the calls alone, so a recording can be replayed);
 * - a tool it has no rule for gets a verdict, never an exception; an ordinary task input is not stopped;
 * - the secrets a call needs are names, the same for the same call; an allow_always is described in words;
 * - a task run under it, its prompts answered, replays from its log with the same verdicts, event for event.
 */
export function runPermissionServiceConformance(
  name: string,
  make: (root: string) => PermissionServiceUnderTest,
): void {
  describe(`PermissionService conformance: ${name}`, () => {
    const temp = useTempStore('rl-permission-conformance-');
    const fresh = () => {
      writeFileSync(join(temp.dir, CONFORMANCE_FILE), 'recorded content');
      return make(temp.dir);
    };
    const subjectOf = (draw: PermissionDraw): PermissionSubject => {
      const tool = testToolRegistry(temp.dir).get(draw.tool);
      if (!tool) throw new Error(`${draw.tool} is not a tool of the test registry`);
      return { manifest: tool.manifest, args: draw.args, session_id: SESSION };
    };
    const drawn = (under: PermissionServiceUnderTest) =>
      RUN_ORDER.flatMap((verdict) => {
        const draw = under.draws[verdict];
        return draw ? [{ verdict, draw }] : [];
      });
    const expectCheck = (c: PermissionCheck) => {
      expect(PERMISSION_VERDICTS).toContain(c.verdict);
      expect(typeof c.reason).toBe('string');
      expect(c.reason).toMatch(/\S/);
      expect(c.rule === null || (typeof c.rule === 'string' && c.rule.length > 0)).toBe(true);
    };

    it('given a call it is configured to answer with a verdict, when checked, then that verdict, with its reason and rule', () => {
      const under = fresh();
      const cases = drawn(under);
      expect(cases.map((c) => c.verdict)).toContain('allow');
      for (const { verdict, draw } of cases) {
        const check = under.sut.check(subjectOf(draw));
        expectCheck(check);
        expect({ tool: draw.tool, verdict: check.verdict }).toEqual({ tool: draw.tool, verdict });
        if (verdict !== 'allow') expect(check.rule).toMatch(/\S/);
      }
    });

    it('a fresh instance given the same calls in the same order answers the same', () => {
      const calls = drawn(fresh()).map((c) => subjectOf(c.draw));
      const unknown = { manifest: manifestOf('conformance_unknown'), args: {}, session_id: SESSION };
      const answers = () => {
        const { sut } = fresh();
        return [...calls, unknown, ...calls].map((s) => ({
          check: sut.check(s),
          secrets: sut.requiredSecrets(s),
        }));
      };
      expect(answers()).toEqual(answers());
    });

    it('a tool it has no rule for gets a verdict, never an exception; an ordinary task input is not stopped', () => {
      const { sut } = fresh();
      const unknown = manifestOf('conformance_unknown', { requires_permission: true });
      expectCheck(sut.check({ manifest: unknown, args: { anything: 1 }, session_id: SESSION }));
      expectCheck(sut.check({ manifest: manifestOf('conformance_other'), args: {}, session_id: SESSION }));
      const input = sut.checkTaskInput(`read ${CONFORMANCE_FILE}`);
      expectCheck(input);
      expect(input.verdict).not.toBe('hard_stop');
    });

    it('lists the secrets a call needs as names, the same for the same call; says in words what an allow_always covers', () => {
      const under = fresh();
      for (const { draw } of drawn(under)) {
        const subject = subjectOf(draw);
        const secrets = under.sut.requiredSecrets(subject);
        expect(Array.isArray(secrets) && secrets.every((s) => typeof s === 'string' && s.length > 0)).toBe(
          true,
        );
        expect(under.sut.requiredSecrets(subject)).toEqual(secrets);
      }
      const prompt = under.draws.prompt;
      const rule = prompt ? under.sut.check(subjectOf(prompt)).rule : null;
      expect(under.sut.allowAlwaysCovers(prompt?.tool ?? 'echo', rule)).toMatch(/\S/);
    });

    it('a task run under it, its prompts answered, replays from its log with the same verdicts, event for event', async () => {
      const under = fresh();
      const cases = drawn(under);
      const model = new ScriptedBackend({
        orchestrator: [
          ...cases.map((c) => JSON.stringify({ type: 'tool', tool: c.draw.tool, args: c.draw.args })),
          '{"type":"respond","content":"done"}',
        ],
      });
      const rt = await startTestRuntime({
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        permissions: under.sut,
        model,
      });
      let original: readonly RuntimeEvent[];
      try {
        const { task_id } = await rt.runtime.submit({ input: 'conformance' }, { source: 'cli' });
        let p = await rt.runtime.settled(task_id);
        while (p.status === 'awaiting_permission' && p.pendingPermission) {
          await rt.runtime.resolvePermission(task_id, p.pendingPermission.request_id, 'allow_once');
          p = await rt.runtime.settled(task_id);
        }
        expect(p.final).not.toBeNull();
        original = await temp.store.readWholeStream(task_id);
      } finally {
        await rt.close();
      }
      // the run met each verdict as the policy gave it
      const asked = original.filter((e) => e.type === 'TASK_AWAITING_PERMISSION').map((e) => e.payload.tool);
      const refused = original.flatMap((e) =>
        e.type === 'TOOL_FAILED' &&
        (e.payload.error_kind === 'permission_denied' || e.payload.error_kind === 'hard_stop')
          ? [{ tool: e.payload.tool, kind: e.payload.error_kind }]
          : [],
      );
      expect(asked).toEqual(under.draws.prompt ? [under.draws.prompt.tool] : []);
      expect(refused).toEqual([
        ...(under.draws.deny ? [{ tool: under.draws.deny.tool, kind: 'permission_denied' }] : []),
        ...(under.draws.hard_stop ? [{ tool: under.draws.hard_stop.tool, kind: 'hard_stop' }] : []),
      ]);

      const { events: replayed } = await replayTask(
        { store: temp.store, tools: testToolRegistry(temp.dir), logger: new RecordingRuntimeLogger() },
        original[0].task_id,
      );
      expect(replayView(replayed)).toEqual(replayView(original));
    });
  });
}
