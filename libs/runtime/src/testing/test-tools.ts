import { execFile } from 'node:child_process';
import { appendFile, readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import Ajv, { ValidateFunction } from 'ajv';
import { PermissionCheck, ToolManifest, ToolResult } from '@runledger/contracts';
import { PermissionService, PermissionSubject } from '@runledger/permissions';
import { ArgsValidation, RegisteredTool, ToolExecutionContext, ToolRegistry } from '@runledger/tools';

type Run = (args: Record<string, unknown>, ctx: ToolExecutionContext) => Promise<unknown>;

const manifest = (
  m: Partial<ToolManifest> & Pick<ToolManifest, 'name' | 'description' | 'args_schema'>,
): ToolManifest => ({
  requires_permission: false,
  idempotent: false,
  timeout_ms: 30_000,
  secrets: [],
  sensitive_output: false,
  entry: 'index.js',
  ...m,
});

/** A tool manifest named `name` that takes any object, with `extra` over the defaults; for tests. */
export const manifestOf = (name: string, extra: Partial<ToolManifest> = {}): ToolManifest =>
  manifest({ name, description: name, args_schema: { type: 'object' }, timeout_ms: 1000, ...extra });

const obj = (props: Record<string, unknown>, required: string[]) => ({
  type: 'object',
  properties: props,
  required,
  additionalProperties: false,
});

/** A registry of plain functions, validated with ajv against each manifest; for tests and the CLI before the plugin registry. */
export class InMemoryToolRegistry extends ToolRegistry {
  private readonly tools = new Map<string, RegisteredTool>();
  private readonly ajv = new Ajv({ allErrors: true });
  /** compiled when a tool is added, as the plugin and MCP registries do, not on its first call */
  private readonly validators = new Map<string, ValidateFunction>();

  add(m: ToolManifest, run: Run): this {
    this.validators.set(m.name, this.ajv.compile(m.args_schema));
    this.tools.set(m.name, {
      manifest: m,
      run: async (args, ctx): Promise<ToolResult> => {
        try {
          return { tool: m.name, ok: true, output: await run(args, ctx), error: null, metadata: {} };
        } catch (e) {
          return { tool: m.name, ok: false, output: null, error: (e as Error).message, metadata: {} };
        }
      },
    });
    return this;
  }

  list(): ToolManifest[] {
    return [...this.tools.values()].map((t) => t.manifest);
  }

  get(name: string): RegisteredTool | undefined {
    return this.tools.get(name);
  }

  validateArgs(name: string, args: Record<string, unknown>): ArgsValidation {
    const validate = this.validators.get(name);
    if (!validate) return { ok: false, error: `unknown tool ${name}` };
    return validate(args) ? { ok: true } : { ok: false, error: this.ajv.errorsText(validate.errors) };
  }
}

/**
 * echo, append_line (appends a line to a file; optional delay_ms before it
 * writes), shell_exec (sh -c in `root`), file_read, all rooted in `root`.
 */
export function testToolRegistry(root: string): InMemoryToolRegistry {
  const inRoot = (p: unknown) => {
    const full = resolve(root, String(p));
    if (!isAbsolute(full) || !full.startsWith(resolve(root)))
      throw new Error(`path outside the allowed root: ${String(p)}`);
    return full;
  };
  const wait = (ms: number, signal: AbortSignal) =>
    new Promise<void>((res, rej) => {
      const t = setTimeout(res, ms);
      signal.addEventListener('abort', () => (clearTimeout(t), rej(new Error('aborted'))), { once: true });
    });
  return new InMemoryToolRegistry()
    .add(
      manifest({
        name: 'echo',
        description: 'Returns its text.',
        args_schema: obj({ text: { type: 'string' } }, ['text']),
        idempotent: true,
      }),
      async (a) => a.text,
    )
    .add(
      manifest({
        name: 'append_line',
        description: 'Appends a line to a file.',
        args_schema: obj(
          { path: { type: 'string' }, line: { type: 'string' }, delay_ms: { type: 'integer' } },
          ['path', 'line'],
        ),
      }),
      async (a, ctx) => {
        if (typeof a.delay_ms === 'number') await wait(a.delay_ms, ctx.signal);
        await appendFile(inRoot(a.path), `${String(a.line)}\n`);
        return `appended ${String(a.line)}`;
      },
    )
    .add(
      manifest({
        name: 'file_read',
        description: 'Reads a text file.',
        args_schema: obj({ path: { type: 'string' } }, ['path']),
        idempotent: true,
      }),
      async (a) => readFile(inRoot(a.path), 'utf8'),
    )
    .add(
      manifest({
        name: 'shell_exec',
        description: 'Runs a shell command.',
        args_schema: obj({ command: { type: 'string' } }, ['command']),
      }),
      (a, ctx) =>
        new Promise((res, rej) =>
          execFile(
            'sh',
            ['-c', String(a.command)],
            { cwd: root, signal: ctx.signal },
            (err, stdout, stderr) =>
              err ? rej(new Error(`${err.message}${stderr}`)) : res({ exit_code: 0, stdout, stderr }),
          ),
        ),
    );
}

/** Allows everything; lists no extra secrets. For tests. */
export class AllowAllPolicy extends PermissionService {
  check(_subject: PermissionSubject): PermissionCheck {
    return { verdict: 'allow', rule: null, reason: 'allowed' };
  }
  checkTaskInput(): PermissionCheck {
    return { verdict: 'allow', rule: null, reason: 'allowed' };
  }
  requiredSecrets(_subject: PermissionSubject): string[] {
    return [];
  }
}

/** Verdicts per tool name, `allow` for the rest; for permission tests. */
export class RuleTablePolicy extends AllowAllPolicy {
  constructor(
    private readonly verdicts: Record<string, PermissionCheck['verdict']>,
    private readonly secrets: Record<string, string[]> = {},
  ) {
    super();
  }
  override check(s: PermissionSubject): PermissionCheck {
    const verdict = this.verdicts[s.manifest.name] ?? 'allow';
    return { verdict, rule: `tool:${s.manifest.name}`, reason: `${s.manifest.name} is ${verdict}` };
  }
  override requiredSecrets(s: PermissionSubject): string[] {
    return this.secrets[s.manifest.name] ?? [];
  }
}

/** Like `sudo -S`: runs a command in `root` with the sudo_password secret on its stdin, and only there. */
export const SUDO_STDIN: ToolManifest = manifest({
  name: 'sudo_stdin',
  description: 'Runs a command with the sudo password on stdin.',
  args_schema: obj({ command: { type: 'string' } }, ['command']),
  secrets: ['sudo_password'],
});

/** testToolRegistry(root) with SUDO_STDIN besides. */
export const withSudoStdin = (root: string): InMemoryToolRegistry =>
  testToolRegistry(root).add(
    SUDO_STDIN,
    (a, ctx) =>
      new Promise((res, rej) => {
        const child = execFile('sh', ['-c', String(a.command)], { cwd: root }, (err, stdout, stderr) =>
          err ? rej(err) : res({ exit_code: 0, stdout, stderr }),
        );
        child.stdin!.end(`${ctx.secrets.get('sudo_password')}\n`);
      }),
  );
