import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('file-writing program specs', () => {
  it.each([
    ['rm -rf /', 'hard_stop', 'rm_root'],
    ['rm -r --no-preserve-root x', 'hard_stop', 'rm_root'],
    ['rmdir /usr', 'hard_stop', 'rm_root'],
    ['shred /dev/sda', 'hard_stop', 'write_block_device'],
    ['rm a.txt', 'prompt', 'delete_program'],
    ['rm /tmp/a.txt', 'deny', 'write_outside_root'],
    ['chmod -R 777 /', 'hard_stop', 'chmod_root'],
    ['chown nobody /', 'hard_stop', 'chmod_root'],
    ['chmod 644 a.txt', 'prompt', 'write_inside_root'],
    ['chmod 644 /etc/passwd', 'hard_stop', 'write_system_path'],
    ['mv /etc /tmp/etc', 'hard_stop', 'mv_root'],
    ['mv a.txt b.txt', 'prompt', 'write_inside_root'],
    ['mv /tmp/x a.txt', 'deny', 'write_outside_root'],
    ['touch new.txt', 'prompt', 'write_inside_root'],
    ['tee -a /etc/sudoers', 'hard_stop', 'write_system_path'],
    ['mkdir /opt/x', 'deny', 'write_outside_root'],
    ['cp a.txt b.txt', 'prompt', 'write_inside_root'],
    ['cp /etc/shadow b.txt', 'prompt', 'write_inside_root'],
    ['cp a.txt /tmp/b.txt', 'deny', 'write_outside_root'],
    ['cp -t /usr/bin a b', 'hard_stop', 'write_system_path'],
    ['ln -s /etc/passwd p', 'prompt', 'write_inside_root'],
    ['dd if=/dev/zero of=/dev/sda', 'hard_stop', 'write_block_device'],
    ['dd if=a.img of=b.img', 'prompt', 'write_inside_root'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
