import { Logger } from '@nestjs/common';
import pino from 'pino';
import { NestLogLines } from './nest-log-lines';

function capture(level = 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino(
    { level, base: null, timestamp: false },
    { write: (l: string) => lines.push(JSON.parse(l)) },
  );
  return { sut: new NestLogLines(log), lines };
}

describe('NestLogLines', () => {
  it('writes a message with its context (Nest passes it last) at the matching level', () => {
    const { sut, lines } = capture('trace');
    sut.log('Nest application successfully started', 'NestApplication');
    sut.warn('careful', 'Scope');
    sut.debug('details', 'Scope');
    sut.verbose('more', 'Scope');
    sut.fatal('gone', 'Scope');
    expect(lines).toEqual([
      { level: 30, context: 'NestApplication', msg: 'Nest application successfully started' },
      { level: 40, context: 'Scope', msg: 'careful' },
      { level: 20, context: 'Scope', msg: 'details' },
      { level: 10, context: 'Scope', msg: 'more' },
      { level: 60, context: 'Scope', msg: 'gone' },
    ]);
  });

  it('writes a message without a context as it is', () => {
    const { sut, lines } = capture();
    sut.log('plain');
    expect(lines).toEqual([{ level: 30, msg: 'plain' }]);
  });

  it("formats a message's arguments, the context still last", () => {
    const { sut, lines } = capture();
    sut.log('%s of %d', 'one', 2, 'Scope');
    expect(lines).toEqual([{ level: 30, context: 'Scope', msg: 'one of 2' }]);
  });

  it('keeps an Error as err, an object as fields', () => {
    const { sut, lines } = capture();
    sut.error(new Error('boom'), 'Scope');
    sut.log({ task_id: 't1' }, 'Scope');
    expect(lines[0]).toMatchObject({ level: 50, context: 'Scope', err: { message: 'boom', type: 'Error' } });
    expect(lines[1]).toEqual({ level: 30, context: 'Scope', task_id: 't1' });
  });

  it("turns an exception handler's (message, stack, context) into an error with that stack", () => {
    const { sut, lines } = capture();
    const stack = 'Error: boom\n    at handler (app.ts:1:1)';
    sut.error('boom', stack, 'ExceptionsHandler');
    expect(lines).toEqual([
      {
        level: 50,
        context: 'ExceptionsHandler',
        err: { type: 'Error', message: 'boom', stack },
        msg: 'boom',
      },
    ]);
  });

  it('keeps an undefined argument in its place', () => {
    const { sut, lines } = capture();
    sut.log('a %s %s', undefined, 'b', 'Scope');
    expect(lines).toEqual([{ level: 30, context: 'Scope', msg: 'a undefined b' }]);
  });

  it("takes Nest's Logger calls as Nest makes them (its ExceptionsHandler passes the error, nothing, then the context)", () => {
    const { sut, lines } = capture();
    Logger.overrideLogger(sut);
    try {
      new Logger('ExceptionsHandler').error(new Error('boom'));
      new Logger('RoutesResolver').log('TasksController {/tasks}');
    } finally {
      Logger.overrideLogger(false);
    }
    expect(lines).toEqual([
      expect.objectContaining({
        level: 50,
        context: 'ExceptionsHandler',
        err: expect.objectContaining({ message: 'boom' }),
      }),
      { level: 30, context: 'RoutesResolver', msg: 'TasksController {/tasks}' },
    ]);
  });

  it('writes nothing below the logger level', () => {
    const { sut, lines } = capture('warn');
    sut.log('hidden', 'Scope');
    sut.debug('hidden', 'Scope');
    sut.warn('shown', 'Scope');
    expect(lines.map((l) => l.msg)).toEqual(['shown']);
  });
});
