import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('read-only program specs', () => {
  it.each([
    ['cat a.txt', 'allow', null],
    ['ls -la sub', 'allow', null],
    ['cat /etc/passwd', 'prompt', 'read_outside_root'],
    ['head -n 5 ../x', 'prompt', 'read_outside_root'],
    ['cat a.txt > /dev/null', 'allow', null],
    ['sort -o sorted.txt a.txt', 'prompt', 'write_inside_root'],
    ['sort -o /etc/x a.txt', 'hard_stop', 'write_system_path'],
    ['sort --output=/tmp/x a.txt', 'deny', 'write_outside_root'],
    ['sort -o/tmp/x a.txt', 'deny', 'write_outside_root'],
    ['tree -o /tmp/t .', 'deny', 'write_outside_root'],
    ['iconv -f latin1 -t utf8 -o /etc/x a', 'hard_stop', 'write_system_path'],
    ['uniq a.txt b.txt', 'prompt', 'write_inside_root'],
    ['uniq a.txt', 'allow', null],
    ['uniq a.txt /tmp/b', 'deny', 'write_outside_root'],
    ['xxd a.bin /usr/x', 'hard_stop', 'write_system_path'],
    ['diff --from-file=/etc/shadow a.txt', 'prompt', 'read_outside_root'],
    ['wc --files0-from=../names', 'prompt', 'read_outside_root'],
    ['du -X /etc/exclude .', 'prompt', 'read_outside_root'],
    ['file -m /etc/magic a.bin', 'prompt', 'read_outside_root'],
    ['strings @/etc/shadow', 'prompt', 'read_outside_root'],
    ['strings a.bin', 'allow', null],
    ['sort -uo /tmp/x a.txt', 'deny', 'write_outside_root'],
    ['sort --files0-from=/etc/names', 'prompt', 'read_outside_root'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
