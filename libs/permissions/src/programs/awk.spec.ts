import { describeVerdicts } from './testing-verdicts';

describeVerdicts('awk program spec', [
  ['awk "{print $1}" a.txt', 'allow', null],
  ['gawk 1 /etc/passwd', 'prompt', 'read_outside_root'],
  ['awk -f ../prog.awk a.txt', 'prompt', 'read_outside_root'],
  ['gawk --include=../lib.awk 1 a.txt', 'prompt', 'read_outside_root'],
  ['awk -f prog.awk a.txt', 'allow', null],
  ['awk "BEGIN{system(\\"id\\")}"', 'prompt', 'awk_side_effects'],
  ['awk "{print > \\"out\\"}" a.txt', 'prompt', 'awk_side_effects'],
  ['mawk "{ \\"date\\" | getline d }" a.txt', 'prompt', 'awk_side_effects'],
]);
