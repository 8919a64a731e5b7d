import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('pure program spec', () => {
  it.each([
    ['echo hello /etc/passwd', 'allow', null],
    ['pwd', 'allow', null],
    ['date +%s', 'allow', null],
    ['printf %s x', 'allow', null],
    ['echo x > /tmp/y', 'deny', 'write_outside_root'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
