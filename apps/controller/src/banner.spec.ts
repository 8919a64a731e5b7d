import { startupBanner } from './banner';

describe('startupBanner', () => {
  const url = 'http://127.0.0.1:3000';

  it('gives the dashboard address with the token when the server generated it', () => {
    const token = 'abc/def+123';
    expect(
      startupBanner({ url, generatedAdminToken: { token, file: '/data/admin.token', created: true } }),
    ).toBe(
      'runledger listening on http://127.0.0.1:3000\n' +
        'generated admin token in /data/admin.token\n' +
        'dashboard: http://127.0.0.1:3000/admin#token=abc%2Fdef%2B123\n',
    );
    expect(
      startupBanner({ url, generatedAdminToken: { token, file: '/data/admin.token', created: false } }),
    ).toContain('using admin token in /data/admin.token\n');
  });

  it('gives the dashboard address without a token when the token was configured', () => {
    expect(startupBanner({ url, generatedAdminToken: null })).toBe(
      'runledger listening on http://127.0.0.1:3000\n' +
        'dashboard: http://127.0.0.1:3000/admin (sign in with a configured token)\n',
    );
  });
});
