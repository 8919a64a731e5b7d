import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** scripts/pretest.js, the set-up `npm test` runs first on a fresh machine. */
interface Pretest {
  setUp(o: {
    env: NodeJS.ProcessEnv;
    isRoot: boolean;
    listsMissing: boolean;
    run: (cmd: string, args: string[], env: NodeJS.ProcessEnv) => number | null;
    log: (line: string) => void;
    /** where Debian's chromium package puts it (/usr/bin/chromium) */
    defaultChromium?: string;
  }): number;
}
const SCRIPT = join(__dirname, '..', 'scripts', 'pretest.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { setUp } = require(SCRIPT) as Pretest;

describe('scripts/pretest.js', () => {
  let dir: string;
  let bin: string;
  let chromium: string;
  let log: string[];
  let ran: string[];
  const executable = (path: string) => {
    writeFileSync(path, '#!/bin/sh\nexit 0\n');
    chmodSync(path, 0o755);
  };
  /** an apt-get that records its arguments and, on install, puts what it was asked for in place */
  const fakeApt = (result: (args: string[]) => number) => (cmd: string, args: string[]) => {
    ran.push(`${cmd} ${args.join(' ')}`);
    const code = result(args);
    if (code === 0 && args[0] === 'install') {
      if (args.includes('bubblewrap')) executable(join(bin, 'bwrap'));
      if (args.includes('chromium')) executable(chromium);
    }
    return code;
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-pretest-'));
    bin = join(dir, 'bin');
    mkdirSync(bin);
    chromium = join(dir, 'chromium');
    log = [];
    ran = [];
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const base = () => ({
    env: { PATH: bin },
    defaultChromium: chromium,
    log: (line: string) => log.push(line),
  });
  /** set-up as root on a machine with apt-get, whose runs end as `aptResult` says */
  const setUpAsRoot = (listsMissing: boolean, aptResult: (args: string[]) => number) =>
    setUp({ ...base(), isRoot: true, listsMissing, run: fakeApt(aptResult) });

  it('does nothing when bubblewrap and Chromium are there', () => {
    executable(join(bin, 'bwrap'));
    executable(chromium);
    const code = setUpAsRoot(true, () => 0);
    expect({ code, log, ran }).toEqual({ code: 0, log: [], ran: [] });
  });

  it('as root with apt-get: updates the empty package lists, installs what is missing, and says so', () => {
    executable(join(bin, 'apt-get'));
    executable(chromium);
    const code = setUpAsRoot(true, () => 0);
    expect(code).toBe(0);
    expect(ran).toEqual(['apt-get update', 'apt-get install -y bubblewrap']);
    expect(log).toEqual([
      'pretest: the tests need bubblewrap; installing with apt-get',
      'pretest: $ apt-get update',
      'pretest: $ apt-get install -y bubblewrap',
    ]);
  });

  it('refreshes stale package lists once when the install fails, and fails in one line if it still does', () => {
    executable(join(bin, 'apt-get'));
    executable(chromium);
    const retried = setUpAsRoot(false, (args) =>
      args[0] === 'install' && !ran.includes('apt-get update') ? 100 : 0,
    );
    expect(retried).toBe(0);
    expect(ran).toEqual(['apt-get install -y bubblewrap', 'apt-get update', 'apt-get install -y bubblewrap']);

    rmSync(join(bin, 'bwrap'));
    ran = [];
    log = [];
    const failed = setUpAsRoot(false, (args) => (args[0] === 'install' ? 100 : 0));
    expect(failed).toBe(1);
    expect(log[log.length - 1]).toBe(
      'pretest: apt-get did not install bubblewrap; install by hand (sudo apt-get install -y bubblewrap) and run npm test again',
    );
  });

  it('without root (or apt-get) it installs nothing and names what to install in one line', () => {
    executable(join(bin, 'apt-get'));
    const code = setUp({ ...base(), isRoot: false, listsMissing: false, run: fakeApt(() => 0) });
    expect(code).toBe(1);
    expect(ran).toEqual([]);
    expect(log).toEqual([
      'pretest: the tests need bubblewrap and chromium, not installed here; install them (Debian/Ubuntu: sudo apt-get install -y bubblewrap chromium) and run npm test again',
    ]);
  });

  it('a CHROMIUM_PATH that does not exist is named, not papered over by an install', () => {
    const code = setUp({
      ...base(),
      env: { PATH: bin, CHROMIUM_PATH: join(dir, 'nope') },
      isRoot: true,
      listsMissing: false,
      run: fakeApt(() => 0),
    });
    expect(code).toBe(1);
    expect(ran).toEqual([]);
    expect(log).toEqual([
      `pretest: CHROMIUM_PATH=${join(dir, 'nope')} does not exist; point it at a Chromium or unset it`,
    ]);
  });

  it('run as a script with nothing to install from, it exits 1 with one line on stderr', () => {
    const res = spawnSync(process.execPath, [SCRIPT], { env: { PATH: bin }, encoding: 'utf8' });
    expect(res.status).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(
      /^pretest: the tests need bubblewrap[^\n]*sudo apt-get install -y bubblewrap[^\n]*\n$/,
    );
  });
});
