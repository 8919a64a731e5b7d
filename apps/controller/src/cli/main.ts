import { ValidationError } from '@runledger/contracts';
import { EXIT } from './exit-codes';
import { CliOutput } from './output';
import { CliCommand, parseArgs } from './program';

/**
 * The CLI's entry. It parses the arguments and answers help and bad usage itself; only a command
 * that runs loads ./commands (Nest, the stores, the runtime, the tools), so `--help`, `--version` and
 * a mistyped option answer in a third of the CPU time, and `serve` loads the server alone.
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  const io = new CliOutput(process, process.env);
  let cmd: CliCommand;
  try {
    cmd = parseArgs(argv);
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    io.error(e.message);
    return EXIT.usage;
  }
  if (cmd.kind === 'help') {
    io.answer(cmd.text);
    return EXIT.completed;
  }
  if (cmd.kind === 'serve') {
    await import('../main');
    return new Promise<number>(() => undefined);
  }
  const { runCommand } = await import('./commands');
  return runCommand(cmd, io);
}

/**
 * How long a command that has ended may still be kept alive by what it left open. A boot that fails
 * half-way (a data folder it cannot write, a model key missing) leaves the connections its modules
 * opened, a PostgreSQL pool among them, with nobody to close them: the command is over all the same.
 */
const EXIT_GRACE_MS = 2_000;

if (require.main === module || process.env.RUNLEDGER_CLI_ENTRY === '1') {
  void runCli(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    setTimeout(() => process.exit(code), EXIT_GRACE_MS).unref();
  });
}
