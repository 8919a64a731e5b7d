import { describeVerdicts } from './testing-verdicts';

describeVerdicts('network program spec', [
  ['curl http://example.com', 'prompt', 'network_program'],
  ['wget -q http://x/y', 'prompt', 'network_program'],
  ['npm install left-pad', 'prompt', 'network_program'],
  ['ssh host ls', 'prompt', 'network_program'],
  ['rsync a.txt host:/tmp', 'prompt', 'write_inside_root'],
]);
