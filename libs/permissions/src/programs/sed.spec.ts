import { describeVerdicts } from './testing-verdicts';

describeVerdicts('sed program spec', [
  ['sed -n 1p a.txt', 'allow', null],
  ['sed -n 1p ../x.txt', 'prompt', 'read_outside_root'],
  // `/e` in a path reads like sed's execute flag: stricter than needed, never looser
  ['sed s/a/b/ /etc/passwd', 'prompt', 'sed_side_effects'],
  ['sed -i s/a/b/ a.txt', 'prompt', 'write_inside_root'],
  ['sed -i s/a/b/ /etc/passwd', 'hard_stop', 'write_system_path'],
  ['sed --in-place=.bak s/a/b/ /tmp/x', 'deny', 'write_outside_root'],
  ['sed "w /tmp/out" a.txt', 'prompt', 'sed_side_effects'],
  ['sed s/x/y/e a.txt', 'prompt', 'sed_side_effects'],
  ['sed -f ../x.sed a.txt', 'prompt', 'read_outside_root'],
  ['sed --expression=p ../x.txt', 'prompt', 'read_outside_root'],
  ['sed -n -e p a.txt', 'allow', null],
]);
