import type { ToolImplementation, ToolServices } from '../../src/discovery';
import { commandUsesSudo, SUDO_SECRET } from '@runledger/permissions';

interface Args {
  command: string;
  cwd?: string;
  timeout_ms?: number;
}

/** Waits for the whole process group on timeout; the registry's own timeout is the outer bound. */
export function createTool({ sandbox }: ToolServices): ToolImplementation {
  return {
    async run(raw, ctx) {
      const args = raw as unknown as Args;
      const sudo = commandUsesSudo(args.command);
      const password = ctx.secrets.get(SUDO_SECRET);
      if (sudo && !password)
        return {
          ok: false,
          output: null,
          error: `sudo refused: no ${SUDO_SECRET} secret was provided for this call`,
          metadata: { error_kind: 'permission_denied' },
        };
      const r = await sandbox.exec(args.command, {
        cwd: args.cwd,
        timeoutMs: args.timeout_ms ?? 110_000,
        signal: ctx.signal,
        // sudo -S reads the password from stdin; it is never part of the command line or environment
        stdin: sudo && password ? `${password}\n` : undefined,
      });
      const ok = r.exit_code === 0 && !r.timed_out && !r.flooded && !r.cancelled;
      const error = r.timed_out
        ? `timed out after ${r.duration_ms} ms (process group killed)`
        : r.flooded
          ? `output flood: killed after more than ${sandbox.floodLimitBytes} bytes`
          : r.cancelled
            ? 'cancelled'
            : ok
              ? null
              : `exit code ${r.exit_code ?? `signal ${r.signal}`}`;
      return {
        ok,
        output: { exit_code: r.exit_code, stdout: r.stdout, stderr: r.stderr, truncated: r.truncated },
        error,
        metadata: {
          sandbox: r.sandbox,
          signal: r.signal,
          timed_out: r.timed_out,
          flooded: r.flooded,
          truncated: r.truncated,
          ...(r.timed_out ? { error_kind: 'timeout' } : {}),
        },
      };
    },
  };
}
