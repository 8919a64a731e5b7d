import { ToolExecutionContext, ToolRegistry } from '../tool-registry';

/**
 * A registry under test holding an echo tool: one required string argument, answered with output
 * that contains it; `failing` names a tool whose run fails.
 */
export interface ToolRegistryUnderTest {
  sut: ToolRegistry;
  echo: { name: string; arg: string };
  failing: { name: string; args: Record<string, unknown> };
  close?: () => Promise<void>;
}

const ctx = (over: Partial<ToolExecutionContext> = {}): ToolExecutionContext => ({
  task_id: 'task_conf',
  session_id: 'ses_conf',
  step_id: null,
  call_id: 'call_conf',
  signal: new AbortController().signal,
  secrets: new Map(),
  ...over,
});

/**
 * What every ToolRegistry promises the runtime: it lists what it can run and finds it by name;
 * it checks arguments against the manifest without throwing; `invoke` never throws, runs a valid
 * call, turns an unknown tool, bad arguments and a failing run into `ok: false` with an
 * error_kind, and keeps the call's secrets out of the result.
 */
export function runToolRegistryConformance(name: string, make: () => Promise<ToolRegistryUnderTest>): void {
  describe(`ToolRegistry conformance: ${name}`, () => {
    let under: ToolRegistryUnderTest;
    beforeAll(async () => {
      under = await make();
    }, 30_000);
    afterAll(async () => {
      await under?.close?.();
    });

    it('lists the echo tool with a manifest, finds it by name, and finds no unknown tool', () => {
      const manifest = under.sut.list().find((m) => m.name === under.echo.name);
      expect(manifest).toMatchObject({ name: under.echo.name, args_schema: expect.any(Object) });
      expect(under.sut.get(under.echo.name)?.manifest.name).toBe(under.echo.name);
      expect(under.sut.get('no_such_tool')).toBeUndefined();
    });

    it('checks arguments against the manifest, never throwing', () => {
      const { name, arg } = under.echo;
      expect(under.sut.validateArgs(name, { [arg]: 'hi' })).toEqual({ ok: true });
      for (const bad of [{}, { [arg]: 42 }])
        expect(under.sut.validateArgs(name, bad)).toEqual({ ok: false, error: expect.stringMatching(/\S/) });
      expect(under.sut.validateArgs('no_such_tool', {})).toEqual({
        ok: false,
        error: expect.stringMatching(/\S/),
      });
    });

    it('runs a valid call: ok, with the output', async () => {
      const { name, arg } = under.echo;
      const result = await under.sut.invoke(name, { [arg]: 'conformance-echo' }, ctx());
      expect(result).toMatchObject({ tool: name, ok: true, error: null });
      expect(JSON.stringify(result.output)).toContain('conformance-echo');
    });

    it('answers an unknown tool and bad arguments with ok:false and their error_kind', async () => {
      const unknown = await under.sut.invoke('no_such_tool', {}, ctx());
      expect(unknown).toMatchObject({ ok: false, metadata: { error_kind: 'unknown_tool' } });
      const invalid = await under.sut.invoke(under.echo.name, {}, ctx());
      expect(invalid).toMatchObject({ ok: false, metadata: { error_kind: 'validation_error' } });
      expect(invalid.error).toMatch(/\S/);
    });

    it("keeps the call's secrets out of the result", async () => {
      const { name, arg } = under.echo;
      const secret = 'sekrit-value-9f2c';
      const result = await under.sut.invoke(
        name,
        { [arg]: `pw=${secret}` },
        ctx({ secrets: new Map([['pw', secret]]) }),
      );
      expect(JSON.stringify(result)).not.toContain(secret);
    });

    it('turns a failing run into ok:false with an error, not a throw', async () => {
      const result = await under.sut.invoke(under.failing.name, under.failing.args, ctx());
      expect(result).toMatchObject({ tool: under.failing.name, ok: false });
      expect(result.error).toMatch(/\S/);
    });
  });
}
