import { describeVerdicts } from './testing-verdicts';

describeVerdicts('jq program spec', [
  ['jq .name package.json', 'allow', null],
  ['jq . /etc/config.json', 'prompt', 'read_outside_root'],
  ['jq -f ../filter.jq a.json', 'prompt', 'read_outside_root'],
  ['jq --from-file=filter.jq ../a.json', 'prompt', 'read_outside_root'],
  ['jq -L /etc .', 'prompt', 'read_outside_root'],
]);
