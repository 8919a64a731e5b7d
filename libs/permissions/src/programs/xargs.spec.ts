import { describeVerdicts } from './testing-verdicts';

describeVerdicts('xargs program spec', [
  ['ls | xargs wc -l', 'allow', null],
  ['xargs -a /etc/shadow echo', 'prompt', 'read_outside_root'],
  ['xargs --arg-file=../list cat', 'prompt', 'read_outside_root'],
  ['xargs -a list.txt cat', 'allow', null],
  ['xargs', 'prompt', 'unknown_program'],
]);
