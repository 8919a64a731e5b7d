import { loadConfig } from './config';

describe('RUNLEDGER_DB', () => {
  it('a database URL is refused at boot, naming the variable, instead of becoming a folder called "postgres:"', () => {
    expect(() => loadConfig({ RUNLEDGER_DB: 'postgres://u:p@localhost/runledger' })).toThrow(
      /RUNLEDGER_DB.*SQLite file path/s,
    );
    expect(loadConfig({ RUNLEDGER_DB: './data/x.db' }).RUNLEDGER_DB).toBe('./data/x.db');
  });
});
