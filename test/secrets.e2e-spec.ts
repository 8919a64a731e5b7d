import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isTerminalStatus } from '@runledger/contracts';
import { createSqliteStorage } from '@runledger/state-store';
import { ServerProcess } from './permissions-server';

jest.setTimeout(90_000);

const SECRET = 'Pw-e2e-7f3a9c!x';
/** Every form the secret could be stored in by mistake: plain, base64 (also with the newline sudo -S gets), percent, JSON. */
const FORMS = [
  SECRET,
  Buffer.from(SECRET).toString('base64').slice(0, 16),
  Buffer.from(`${SECRET}\n`).toString('base64').slice(0, 16),
  Buffer.from(SECRET).toString('base64url').slice(0, 16),
  encodeURIComponent(SECRET),
  Buffer.from(SECRET).toString('hex'),
];
const hits = (text: string) => FORMS.filter((f) => text.includes(f));

/**
 * `sudo` needs the sudo_password secret; shell_exec hands it to the command on stdin only (for
 * `sudo -S`). The command then prints what it got, plain on stderr and base64 on stdout: the
 * worst case for redaction.
 */
const LEAKY = 'run sudo -n true 2>/dev/null; tee /dev/stderr | base64';

describe('secrets through HTTP', () => {
  const suiteServer = ServerProcess.forSuite();
  let server: ServerProcess;
  beforeAll(() => {
    server = suiteServer();
  });

  async function toSecretRequest(
    input: string,
    session_id?: string,
  ): Promise<{ taskId: string; requestId: string }> {
    const taskId = (await server.request('POST', '/tasks', { input, session_id })).body.task_id;
    const perm = await server.waitFor(taskId, (s) => s === 'awaiting_permission');
    expect(
      (
        await server.request('POST', `/tasks/${taskId}/permissions/${perm.pending[0].request_id}`, {
          decision: 'allow_once',
        })
      ).status,
    ).toBe(202);
    const waiting = await server.waitFor(taskId, (s) => s === 'awaiting_secret');
    expect(waiting.pending).toEqual([
      expect.objectContaining({ kind: 'secret', secret_name: 'sudo_password', tool: 'shell_exec' }),
    ]);
    return { taskId, requestId: waiting.pending[0].request_id };
  }

  it('provide the secret: the task completes, and the secret is nowhere (SQLite file, logs, responses)', async () => {
    const { taskId, requestId } = await toSecretRequest(LEAKY);
    const provided = await server.request('POST', `/tasks/${taskId}/secrets/${requestId}`, {
      secret: SECRET,
    });
    expect(provided.status).toBe(202);
    expect(provided.text).not.toContain(SECRET);
    const done = await server.waitFor(taskId);
    expect(done.status).toBe('completed');

    const log = await server.events(taskId);
    const outcome = log.find((e) => e.type === 'TOOL_COMPLETED')!;
    // the tool did receive the secret and printed it (plain and base64): both were redacted
    const output = JSON.stringify(outcome.payload);
    expect(output).toContain('[REDACTED]');
    // the log learns that it came and a keyed fingerprint, never the value
    expect(log.find((e) => e.type === 'SECRET_PROVIDED')!.payload).toEqual({
      request_id: requestId,
      call_id: expect.any(String),
      secret_name: 'sudo_password',
      fingerprint: {
        alg: 'hmac-sha256',
        forms: expect.arrayContaining([
          { encoding: 'plain', length: SECRET.length, digest: expect.any(String) },
        ]),
      },
    });

    // read every public view once more, then scan everything
    await server.request('GET', `/tasks/${taskId}`);
    await server.request('GET', '/tasks?limit=100');
    await server.request('GET', '/admin/events?limit=1000');
    await server.request('GET', `/tasks/${taskId}/events?limit=1000`);
    // and every one of those answers is as the OpenAPI document describes it
    expect(await server.responseMismatches()).toEqual([]);
    await server.kill();

    const files = readdirSync(server.dir).filter((f) => f.startsWith('runledger.db'));
    expect(files).toContain('runledger.db');
    for (const f of files) expect(hits(readFileSync(join(server.dir, f)).toString('latin1'))).toEqual([]);
    const logs = server.logs.join('');
    expect(logs.length).toBeGreaterThan(0);
    expect(hits(logs)).toEqual([]);
    expect(server.responses.length).toBeGreaterThan(8);
    for (const r of server.responses) expect(hits(r.text)).toEqual([]);
    await server.start();
  });

  it('without the secret the call does not run; after a restart the waiting task asks again and then completes', async () => {
    const { taskId, requestId } = await toSecretRequest(
      'run sudo -n true 2>/dev/null; echo ran > secret-ran.txt',
    );
    await server.kill();
    await server.start();
    const after = await server.waitFor(taskId, (s) => s === 'awaiting_secret');
    expect(after.pending).toEqual([
      expect.objectContaining({ request_id: requestId, kind: 'secret', secret_name: 'sudo_password' }),
    ]);
    expect(existsSync(join(server.workspace, 'secret-ran.txt'))).toBe(false);
    expect(
      (await server.request('POST', `/tasks/${taskId}/secrets/${requestId}`, { secret: SECRET })).status,
    ).toBe(202);
    expect(await server.waitFor(taskId)).toMatchObject({ status: 'completed' });
    expect(readFileSync(join(server.workspace, 'secret-ran.txt'), 'utf8')).toBe('ran\n');
  });

  it('a secret provided just before a crash is gone after the restart: the task asks for it again', async () => {
    const { taskId, requestId } = await toSecretRequest(
      'run sudo -n true 2>/dev/null; echo again > secret-again.txt',
    );
    await server.kill();
    // The crash came right after SECRET_PROVIDED was written and before the call ran: the log
    // says the secret came, but the value only ever lived in the dead process.
    const storage = await createSqliteStorage({ path: server.env.RUNLEDGER_DB });
    try {
      const store = storage.eventStore;
      const stream = await store.readWholeStream(taskId);
      const asked = stream.find((e) => e.type === 'TASK_AWAITING_SECRET')!;
      await store.append(
        taskId,
        [
          {
            type: 'SECRET_PROVIDED',
            session_id: asked.session_id,
            payload: {
              request_id: requestId,
              call_id: (asked.payload as { call_id: string }).call_id,
              secret_name: 'sudo_password',
            },
          },
        ],
        { expected: stream.length },
      );
    } finally {
      await storage.close();
    }
    await server.start();
    let again = await server.waitFor(taskId, (s) => s === 'awaiting_secret');
    for (let i = 0; i < 400 && again.pending[0]?.request_id === requestId; i++) {
      await new Promise((r) => setTimeout(r, 25));
      again = (await server.request('GET', `/tasks/${taskId}`)).body;
    }
    expect(again.status).toBe('awaiting_secret');
    expect(again.pending[0].request_id).not.toBe(requestId);
    expect(again.pending[0]).toMatchObject({ kind: 'secret', secret_name: 'sudo_password' });
    expect(existsSync(join(server.workspace, 'secret-again.txt'))).toBe(false);
    // the old request is no longer pending
    expect(
      (await server.request('POST', `/tasks/${taskId}/secrets/${requestId}`, { secret: SECRET })).status,
    ).toBe(409);
    expect(
      (
        await server.request('POST', `/tasks/${taskId}/secrets/${again.pending[0].request_id}`, {
          secret: SECRET,
        })
      ).status,
    ).toBe(202);
    expect(await server.waitFor(taskId)).toMatchObject({ status: 'completed' });
    expect(readFileSync(join(server.workspace, 'secret-again.txt'), 'utf8')).toBe('again\n');
  });

  it('a command saved the secret from stdin; later tasks of the session print the file, also after a restart: it is stored nowhere', async () => {
    const session_id = 'sess_saved_secret';
    const { taskId, requestId } = await toSecretRequest(
      'run sudo -n true 2>/dev/null; cat > pw.txt',
      session_id,
    );
    expect(
      (await server.request('POST', `/tasks/${taskId}/secrets/${requestId}`, { secret: SECRET })).status,
    ).toBe(202);
    expect(await server.waitFor(taskId)).toMatchObject({ status: 'completed' });
    expect(readFileSync(join(server.workspace, 'pw.txt'), 'utf8')).toBe(`${SECRET}\n`);

    /** A later task of the session that prints the file (plain and base64), run to its end. */
    const printFile = async () => {
      const id = (
        await server.request('POST', '/tasks', { input: 'run cat pw.txt; base64 pw.txt', session_id })
      ).body.task_id;
      let state = await server.waitFor(id, (s) => s === 'awaiting_permission' || isTerminalStatus(s));
      if (state.status === 'awaiting_permission') {
        await server.request('POST', `/tasks/${id}/permissions/${state.pending[0].request_id}`, {
          decision: 'allow_once',
        });
        state = await server.waitFor(id);
      }
      expect(state.status).toBe('completed');
      const printed = (await server.events(id)).find((e) => e.type === 'TOOL_COMPLETED')!;
      expect(JSON.stringify(printed.payload)).toContain('[REDACTED]');
      return id;
    };
    const before = await printFile();
    await server.kill();
    await server.start();
    const after = await printFile();

    const events = [
      ...(await server.events(taskId)),
      ...(await server.events(before)),
      ...(await server.events(after)),
    ];
    expect(hits(JSON.stringify(events))).toEqual([]);
    await server.kill();
    const files = readdirSync(server.dir).filter((f) => f.startsWith('runledger.db'));
    for (const f of files) expect(hits(readFileSync(join(server.dir, f)).toString('latin1'))).toEqual([]);
    expect(hits(server.logs.join(''))).toEqual([]);
    await server.start();
  });
});
