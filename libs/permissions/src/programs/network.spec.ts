import { RulePermissionPolicy } from '../rule-permission-policy';

const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });

describe('network program spec', () => {
  it.each([
    ['curl http://example.com', 'prompt', 'network_program'],
    ['wget -q http://x/y', 'prompt', 'network_program'],
    ['npm install left-pad', 'prompt', 'network_program'],
    ['ssh host ls', 'prompt', 'network_program'],
    ['rsync a.txt host:/tmp', 'prompt', 'write_inside_root'],
  ])('%j is %s', (command, verdict, rule) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
  });
});
