import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('git program spec', () => {
  it.each([
    ['git status', 'allow', null],
    ['git log --oneline', 'allow', null],
    ['git -C sub diff', 'allow', null],
    ['git -C /etc status', 'prompt', 'read_outside_root'],
    ['git push', 'prompt', 'git_write'],
    ['git commit -m x', 'prompt', 'git_write'],
    ['git -c core.pager=sh log', 'prompt', 'git_config'],
    ['git --exec-path=/tmp status', 'prompt', 'git_config'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
