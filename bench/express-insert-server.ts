/**
 * The baseline of `npm run bench -- submit`: a bare express app whose POST /tasks does what a
 * submission must at least do, one durable SQLite insert (WAL, synchronous=FULL, as the runtime's
 * store), and answers 202. Started as a child process; prints its URL as the controller does.
 * Env: BENCH_BASELINE_DB (the SQLite file).
 */
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import express from 'express';

const db = new Database(process.env.BENCH_BASELINE_DB ?? ':memory:');
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${process.env.RUNLEDGER_SQLITE_SYNCHRONOUS ?? 'FULL'}`);
db.exec(
  'CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, body TEXT NOT NULL, created_at TEXT NOT NULL)',
);
const insert = db.prepare('INSERT INTO tasks (task_id, body, created_at) VALUES (?, ?, ?)');

const app = express();
app.use(express.json());
app.post('/tasks', (req, res) => {
  const taskId = `task_${randomUUID()}`;
  insert.run(taskId, JSON.stringify(req.body), new Date().toISOString());
  res.status(202).json({ task_id: taskId, status: 'queued' });
});
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (address && typeof address === 'object')
    process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
});
process.on('SIGTERM', () => server.close(() => db.close()));
