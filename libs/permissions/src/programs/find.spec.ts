import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('find program spec', () => {
  it.each([
    ['find . -name "*.ts"', 'allow', null],
    ['find /etc -name passwd', 'prompt', 'read_outside_root'],
    ['find / -delete', 'hard_stop', 'find_delete_root'],
    ['find /usr -exec rm {} \\;', 'hard_stop', 'find_delete_root'],
    ['find . -delete', 'prompt', 'delete_program'],
    ['find . -fprint /etc/list', 'hard_stop', 'write_system_path'],
    ['find . -fls /tmp/list', 'deny', 'write_outside_root'],
    ['find -files0-from /etc/names', 'prompt', 'read_outside_root'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
