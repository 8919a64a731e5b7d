import { describeVerdicts } from './testing-verdicts';

describeVerdicts('pure program spec', [
  ['echo hello /etc/passwd', 'allow', null],
  ['pwd', 'allow', null],
  ['date +%s', 'allow', null],
  ['printf %s x', 'allow', null],
  ['date -f /etc/shadow', 'prompt', 'read_outside_root'],
  ['date --file=../dates', 'prompt', 'read_outside_root'],
  ['date -f dates.txt', 'allow', null],
  ['hostname -F /etc/shadow', 'prompt', 'read_outside_root'],
  ['echo x > /tmp/y', 'deny', 'write_outside_root'],
]);
