import { analyzeShell, commandUsesSudo, staticPrefix } from './shell-parse';

const names = (cmd: string) =>
  analyzeShell(cmd)
    .commands.filter((c) => !c.wrapper)
    .map((c) => c.name);

describe('analyzeShell', () => {
  it.each([
    ['ls -la', ['ls']],
    ['a; b && c || d | e & f', ['a', 'b', 'c', 'd', 'e', 'f']],
    ['echo $(whoami) `id`', ['whoami', 'id', 'echo']],
    ['{ a; b; }', ['a', 'b']],
    ['( a )', ['a']],
    ['diff <(a) >(b)', ['a', 'b', 'diff']],
    ['bash -c \'a; sh -c "b"\'', ['a', 'b']],
    ['sudo -u root timeout 5 nice -n 3 nohup env X=1 /usr/bin/rm x', ['rm']],
    ['find . -name x -exec grep -l y {} \\;', ['find', 'grep']],
    ['xargs -n 1 rm', ['rm']],
    ["r''m x", ['rm']],
    ['\\rm x', ['rm']],
    ["$'\\x72m' x", ['rm']],
    ['if true; then a; else b; fi', ['true', 'a', 'b']],
    ['for f in a b c; do cat $f; done', ['cat']],
    ['echo "a; b" # c; d', ['echo']],
    ['cat <<EOF\n$(inner)\nEOF\nafter', ['cat', 'inner', 'after']],
    ["cat <<'EOF'\n$(not_run)\nEOF", ['cat']],
    ['echo "rm x" | sh', ['echo', 'rm', 'sh']],
  ])('%j runs %j', (cmd, expected) => {
    expect(names(cmd)).toEqual(expected);
  });

  it('keeps redirects with their command and marks run-time values as dynamic', () => {
    const [c] = analyzeShell('FOO=1 $CMD "$HOME/x" 2>err.log >> "out file"').commands;
    expect(c).toMatchObject({ dynamic: true, program: '$CMD', assignments: ['FOO=1'] });
    expect(c.args).toEqual([{ text: '$HOME/x', dynamic: true }]);
    expect(c.redirects).toEqual([
      { op: '>', fd: 2, target: { text: 'err.log', dynamic: false } },
      { op: '>>', fd: null, target: { text: 'out file', dynamic: false } },
    ]);
    expect(staticPrefix({ text: '/dev/$X', dynamic: true })).toBe('/dev/');
  });

  it('marks words with an unquoted glob, and only those', () => {
    const [c] = analyzeShell(`cat *.txt /proc/[0-9]*/environ a?c '*.md' "x*" \\*.ts plain`).commands;
    expect(c.args.map((a) => a.glob === true)).toEqual([true, true, true, false, false, false, false]);
    expect(staticPrefix(c.args[1])).toBe('/proc/');
    expect(staticPrefix(c.args[6])).toBe('plain');
  });

  it('records the wrappers a command came through and whether sudo runs it', () => {
    const rm = analyzeShell('sudo bash -c "timeout 3 rm x"').commands.find((c) => c.name === 'rm')!;
    expect(rm).toMatchObject({ sudo: true, via: ['sudo', 'bash -c', 'timeout'] });
    expect(commandUsesSudo('ls | sudo tee x')).toBe(true);
    expect(commandUsesSudo('echo sudo; grep sudo log')).toBe(false);
  });

  it('reports what it cannot parse', () => {
    expect(analyzeShell('echo "open').errors).toContain('unterminated double quote');
    expect(analyzeShell("echo 'open").errors).toContain('unterminated single quote');
    expect(analyzeShell('echo $(open').errors.length).toBeGreaterThan(0);
  });
});
