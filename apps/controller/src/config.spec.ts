import { loadConfig } from './config';

describe('RUNLEDGER_DB', () => {
  it('a database URL is refused at boot, naming the variable, instead of becoming a folder called "postgres:"', () => {
    expect(() => loadConfig({ RUNLEDGER_DB: 'postgres://u:p@localhost/runledger' })).toThrow(
      /RUNLEDGER_DB.*SQLite file path/s,
    );
    expect(loadConfig({ RUNLEDGER_DB: './data/x.db' }).RUNLEDGER_DB).toBe('./data/x.db');
  });
});

describe('checkpoints', () => {
  it('are on, every 50 events, unless configured; a bad value is refused naming the variable', () => {
    expect(loadConfig({})).toMatchObject({
      RUNLEDGER_CHECKPOINTS: 'on',
      RUNLEDGER_CHECKPOINT_EVERY_EVENTS: 50,
    });
    expect(
      loadConfig({ RUNLEDGER_CHECKPOINTS: 'off', RUNLEDGER_CHECKPOINT_EVERY_EVENTS: '7' }),
    ).toMatchObject({ RUNLEDGER_CHECKPOINTS: 'off', RUNLEDGER_CHECKPOINT_EVERY_EVENTS: 7 });
    expect(() => loadConfig({ RUNLEDGER_CHECKPOINTS: 'yes' })).toThrow(/RUNLEDGER_CHECKPOINTS/);
    expect(() => loadConfig({ RUNLEDGER_CHECKPOINT_EVERY_EVENTS: '0' })).toThrow(
      /RUNLEDGER_CHECKPOINT_EVERY_EVENTS/,
    );
  });
});
