import { describeVerdicts } from './testing-verdicts';

describeVerdicts('git program spec', [
  ['git status', 'allow', null],
  ['git log --oneline', 'allow', null],
  ['git -C sub diff', 'allow', null],
  ['git -C /etc status', 'prompt', 'read_outside_root'],
  ['git push', 'prompt', 'git_write'],
  ['git commit -m x', 'prompt', 'git_write'],
  ['git -c core.pager=sh log', 'prompt', 'git_config'],
  ['git --exec-path=/tmp status', 'prompt', 'git_config'],
]);
