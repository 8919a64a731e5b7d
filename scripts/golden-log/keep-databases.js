/**
 * A jest setup file for recording golden logs: before a test removes its temp folder, every
 * SQLite database in it (with its WAL) is copied under $RUNLEDGER_GOLDEN_HARVEST, one numbered
 * folder per removal. scripts/golden-log/record.ts then picks whole streams out of the copies.
 *
 *   RUNLEDGER_GOLDEN_HARVEST=/tmp/harvest npx jest test/timers.e2e-spec.ts \
 *     --setupFiles ./scripts/golden-log/keep-databases.js
 */
const fs = require('node:fs');
const { join } = require('node:path');

const target = process.env.RUNLEDGER_GOLDEN_HARVEST;
if (!target) throw new Error('keep-databases.js needs RUNLEDGER_GOLDEN_HARVEST (the folder to copy into)');

function databasesIn(dir, depth = 0) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return depth < 2 ? databasesIn(path, depth + 1) : [];
    return /\.db$/.test(e.name) ? [path] : [];
  });
}

function keep(path) {
  const databases = databasesIn(path);
  if (databases.length === 0) return;
  const into = join(target, `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`);
  fs.mkdirSync(into, { recursive: true });
  databases.forEach((db, i) => {
    for (const suffix of ['', '-wal', '-shm'])
      if (fs.existsSync(db + suffix)) fs.copyFileSync(db + suffix, join(into, `${i}.db${suffix}`));
  });
}

const rmSync = fs.rmSync;
fs.rmSync = function keepingRmSync(path, options) {
  keep(String(path));
  return rmSync.call(fs, path, options);
};
const rm = fs.promises.rm;
fs.promises.rm = async function keepingRm(path, options) {
  keep(String(path));
  return rm.call(fs.promises, path, options);
};
