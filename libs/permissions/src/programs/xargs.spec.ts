import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('xargs program spec', () => {
  it.each([
    ['ls | xargs wc -l', 'allow', null],
    ['xargs -a /etc/shadow echo', 'prompt', 'read_outside_root'],
    ['xargs --arg-file=../list cat', 'prompt', 'read_outside_root'],
    ['xargs -a list.txt cat', 'allow', null],
    ['xargs', 'prompt', 'unknown_program'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
