import { randomBytes } from 'node:crypto';
import { NewEvent } from '@runledger/contracts';
import { SessionSecrets } from './session-secrets';

const SECRET = 's3cr3t-Value!';
const provided = (session_id: string, fingerprint: ReturnType<SessionSecrets['remember']>): NewEvent => ({
  type: 'SECRET_PROVIDED',
  session_id,
  payload: { request_id: 'sec_1', call_id: 'call_1', secret_name: 'sudo_password', fingerprint },
});
const printed = (session_id: string, stdout: string): NewEvent => ({
  type: 'TOOL_COMPLETED',
  session_id,
  payload: {
    call_id: 'call_2',
    tool: 'shell_exec',
    result: { tool: 'shell_exec', ok: true, output: { exit_code: 0, stdout }, error: null, metadata: {} },
    duration_ms: 1,
  },
});
const stdoutOf = (e: NewEvent) =>
  e.type === 'TOOL_COMPLETED' ? (e.payload.result.output as { stdout: string }).stdout : null;

describe('SessionSecrets', () => {
  const key = randomBytes(32);

  it('the fingerprint holds the value in none of its forms', () => {
    const fp = new SessionSecrets(key).remember('sess_1', SECRET);
    const text = JSON.stringify(fp);
    for (const form of [SECRET, Buffer.from(SECRET).toString('base64'), Buffer.from(SECRET).toString('hex')])
      expect(text).not.toContain(form);
    expect(fp.forms.map((f) => f.encoding)).toEqual(['plain', 'base64', 'base64_newline', 'hex']);
  });

  it('while the process lives, every later event of the session is redacted in every encoding; other sessions are not', () => {
    const sut = new SessionSecrets(key);
    sut.remember('sess_1', SECRET);
    const [mine, theirs] = sut.redactEvents([
      printed('sess_1', `pw=${SECRET} ${encodeURIComponent(SECRET)}`),
      printed('sess_2', SECRET),
    ]);
    expect(stdoutOf(mine)).toBe('pw=[REDACTED] [REDACTED]');
    expect(stdoutOf(theirs)).toBe(SECRET);
  });

  it('after a restart (same key) a whole line or word of a recorded form gives the value back, then every encoding goes', () => {
    const before = new SessionSecrets(key);
    const fp = before.remember('sess_1', SECRET);
    const sut = new SessionSecrets(key);
    sut.redactEvents([provided('sess_1', fp)]);

    const base64Line = Buffer.from(`${SECRET}\n`).toString('base64');
    const [recovered, later] = sut.redactEvents([
      printed('sess_1', `${base64Line}\n`),
      printed('sess_1', `glued:${Buffer.from(SECRET).toString('hex')}x and ${SECRET}`),
    ]);
    expect(stdoutOf(recovered)).toBe('[REDACTED]\n');
    expect(stdoutOf(later)).toBe('glued:[REDACTED]x and [REDACTED]');
  });

  it('with another key the fingerprint recognises nothing', () => {
    const fp = new SessionSecrets(key).remember('sess_1', SECRET);
    const sut = new SessionSecrets(randomBytes(32));
    const [, out] = sut.redactEvents([provided('sess_1', fp), printed('sess_1', SECRET)]);
    expect(stdoutOf(out)).toBe(SECRET);
  });

  it('the fingerprints are loaded from the log once, at the first append', async () => {
    const fp = new SessionSecrets(key).remember('sess_1', SECRET);
    const sut = new SessionSecrets(key);
    const read = jest.fn(async () => [
      {
        ...provided('sess_1', fp),
        event_id: 'evt_1',
        task_id: 'task_1',
        session_id: 'sess_1',
        sequence: 5,
        position: 9,
        causation_id: null,
        correlation_id: 'task_1',
        created_at: new Date().toISOString(),
      } as never,
    ]);
    await sut.load(read);
    await sut.load(read);
    expect(read).toHaveBeenCalledTimes(1);
    expect(stdoutOf(sut.redactEvents([printed('sess_1', `${SECRET}\n`)])[0])).toBe('[REDACTED]\n');
  });
});
