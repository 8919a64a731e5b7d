import { createInterface } from 'node:readline';

export type Tone = 'bold' | 'dim' | 'red' | 'green' | 'yellow' | 'cyan';

/** SGR codes to switch a tone on and back off (22 ends bold and dim, 39 the foreground colour). */
const SGR: Record<Tone, [number, number]> = {
  bold: [1, 22],
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  cyan: [36, 39],
};

/** Colour only for a person at a terminal: never into a pipe or file, never with NO_COLOR (no-color.org) or TERM=dumb. */
export function colourWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  return Boolean(stream.isTTY) && !env.NO_COLOR && env.TERM !== 'dumb';
}

export function paint(enabled: boolean, tone: Tone | null, text: string): string {
  if (!enabled || !tone) return text;
  const [on, off] = SGR[tone];
  return `\x1b[${on}m${text}\x1b[${off}m`;
}

/**
 * One output stream that goes quiet once its reader went away (`| head`, a closed terminal) instead of
 * killing the process in the middle of a task (a tool call cut off, an intent without outcome).
 */
class Channel {
  private open = true;

  constructor(private readonly stream: NodeJS.WriteStream) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
      this.open = false;
    });
  }

  write(text: string): void {
    if (this.open) this.stream.write(text);
  }
}

/**
 * Where the CLI writes. stdout carries the answer (the task's result, a report) and, with --json,
 * the machine-readable event lines; stderr carries what a person watches: progress, questions and
 * diagnostics. So `runledger run "..." > answer.txt` leaves only the answer in the file.
 */
export class CliOutput {
  readonly colour: boolean;
  private readonly stdout: Channel;
  private readonly stderr: Channel;

  constructor(
    private readonly streams: {
      stdin: NodeJS.ReadStream;
      stdout: NodeJS.WriteStream;
      stderr: NodeJS.WriteStream;
    },
    env: NodeJS.ProcessEnv,
  ) {
    this.stdout = new Channel(streams.stdout);
    this.stderr = new Channel(streams.stderr);
    this.colour = colourWanted(streams.stderr, env);
  }

  /** A person can be asked: the question goes to stderr, the reply comes from stdin. */
  get interactive(): boolean {
    return Boolean(this.streams.stdin.isTTY && this.streams.stderr.isTTY);
  }

  /** Text for stdout, ended by exactly one newline. */
  answer(text: string): void {
    this.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** A line for the person watching, on stderr. */
  progress(line: string, tone: Tone | null = null): void {
    this.stderr.write(`${paint(this.colour, tone, line)}\n`);
  }

  /** A one-line diagnostic on stderr: `runledger: <message>`. */
  error(message: string): void {
    this.stderr.write(`${paint(this.colour, 'red', 'runledger:')} ${message}\n`);
  }

  /** Asks on stderr and reads the reply from stdin; a hidden reply (a secret) is not echoed. */
  ask(question: string, hidden = false): Promise<string> {
    const rl = createInterface({ input: this.streams.stdin, output: this.streams.stderr, terminal: true });
    if (hidden) {
      // Echo nothing of what is typed: the value is a secret.
      (rl as unknown as { _writeToOutput: (s: string) => void })._writeToOutput = (s: string) => {
        if (s.includes(question)) this.stderr.write(question);
      };
    }
    return new Promise((resolve) =>
      rl.question(question, (reply) => {
        rl.close();
        if (hidden) this.stderr.write('\n');
        resolve(reply);
      }),
    );
  }
}
