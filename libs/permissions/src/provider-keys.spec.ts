import { scrubProviderKeys } from './provider-keys';

describe('scrubProviderKeys', () => {
  it('removes the named variables and leaves the rest', () => {
    const env: NodeJS.ProcessEnv = { OPENAI_API_KEY: 'sk-1', BACKUP_KEY: 'sk-2', PATH: '/bin' };
    scrubProviderKeys(env, ['OPENAI_API_KEY', 'BACKUP_KEY', 'NEVER_SET']);
    expect(env).toEqual({ PATH: '/bin' });
  });
});
