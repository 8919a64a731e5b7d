import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('jq program spec', () => {
  it.each([
    ['jq .name package.json', 'allow', null],
    ['jq . /etc/config.json', 'prompt', 'read_outside_root'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
