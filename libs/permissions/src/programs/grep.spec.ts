import { describeVerdicts } from './testing-verdicts';

describeVerdicts('grep program spec', [
  ['grep -rn foo .', 'allow', null],
  ['grep /etc/passwd a.txt', 'allow', null],
  ['grep root /etc/passwd', 'prompt', 'read_outside_root'],
  ['egrep -l x sub /etc', 'prompt', 'read_outside_root'],
  ['rg foo ../other', 'prompt', 'read_outside_root'],
  ['grep -f /etc/shadow a.txt', 'prompt', 'read_outside_root'],
  ['grep --file=../pats a.txt', 'prompt', 'read_outside_root'],
  ['grep -ie root /etc/shadow', 'prompt', 'read_outside_root'],
  ['grep -e x a.txt', 'allow', null],
  ['rg --ignore-file /etc/ignore x', 'prompt', 'read_outside_root'],
]);
