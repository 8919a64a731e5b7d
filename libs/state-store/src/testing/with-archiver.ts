import { Archiver, ArchiverOptions } from '../archive/archiver';
import { openSqliteArchiver, postgresArchiver } from '../archive/open-archiver';
import { Storage } from '../storage';
import { TempStorage } from './temp-storage';

/** Runs `body` with an archiver on the temp storage's database: its own connection on SQLite, closed after. */
export async function withArchiver<T>(
  temp: TempStorage<Storage>,
  body: (archiver: Archiver) => Promise<T>,
  options: Omit<ArchiverOptions, 'folder'> = {},
): Promise<T> {
  if (temp.storage.driver === 'postgres') return body(postgresArchiver(temp.storage.db, options));
  const access = openSqliteArchiver(temp.path, options);
  try {
    return await body(access.archiver);
  } finally {
    await access.close();
  }
}
