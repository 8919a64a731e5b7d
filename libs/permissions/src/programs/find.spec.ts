import { describeVerdicts } from './testing-verdicts';

describeVerdicts('find program spec', [
  ['find . -name "*.ts"', 'allow', null],
  ['find /etc -name passwd', 'prompt', 'read_outside_root'],
  ['find / -delete', 'hard_stop', 'find_delete_root'],
  ['find /usr -exec rm {} \\;', 'hard_stop', 'find_delete_root'],
  ['find . -delete', 'prompt', 'delete_program'],
  ['find . -fprint /etc/list', 'hard_stop', 'write_system_path'],
  ['find . -fls /tmp/list', 'deny', 'write_outside_root'],
  ['find -files0-from /etc/names', 'prompt', 'read_outside_root'],
]);
