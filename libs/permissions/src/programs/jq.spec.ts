import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('jq program spec', () => {
  it.each([
    ['jq .name package.json', 'allow', null],
    ['jq . /etc/config.json', 'prompt', 'read_outside_root'],
    ['jq -f ../filter.jq a.json', 'prompt', 'read_outside_root'],
    ['jq --from-file=filter.jq ../a.json', 'prompt', 'read_outside_root'],
    ['jq -L /etc .', 'prompt', 'read_outside_root'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
