import { check, ProgramSpec } from './program-spec';

/** Programs that use the network or install software: always ask. (rsync and scp are copiers.) */
export const NETWORK: ProgramSpec = {
  names: [
    'curl',
    'wget',
    'ssh',
    'sftp',
    'nc',
    'ncat',
    'netcat',
    'socat',
    'telnet',
    'ftp',
    'ping',
    'dig',
    'nslookup',
    'host',
    'apt',
    'apt-get',
    'pip',
    'pip3',
    'npm',
    'npx',
    'yarn',
    'pnpm',
    'docker',
    'kubectl',
    'aria2c',
    'lynx',
    'w3m',
  ],
  effects: ({ name }) => [
    check('prompt', 'network_program', `${name} uses the network or installs software`),
  ],
};
