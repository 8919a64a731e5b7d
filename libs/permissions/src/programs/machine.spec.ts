import { describeVerdicts } from './testing-verdicts';

describeVerdicts('machine program specs', [
  ['mkfs.ext4 /dev/sda1', 'hard_stop', 'program_mkfs_ext4'],
  ['mkfs -t xfs /dev/sdb', 'hard_stop', 'program_mkfs'],
  ['wipefs -a /dev/sda', 'hard_stop', 'program_wipefs'],
  ['shutdown -h now', 'hard_stop', 'program_shutdown'],
  ['init 0', 'hard_stop', 'program_init'],
  ['init q', 'prompt', 'unknown_program'],
  ['systemctl reboot', 'hard_stop', 'systemctl_power'],
  ['systemctl status nginx', 'prompt', 'unknown_program'],
  ['fdisk -l', 'prompt', 'disk_tool'],
  ['fdisk /dev/sda', 'hard_stop', 'disk_tool'],
  ['parted /dev/sda print', 'prompt', 'disk_tool'],
  ['kill -9 -1', 'hard_stop', 'kill_all'],
  ['kill 1', 'hard_stop', 'kill_all'],
  ['pkill -HUP -1', 'hard_stop', 'kill_all'],
  ['kill 4242', 'prompt', 'unknown_program'],
]);
