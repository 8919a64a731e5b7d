/**
 * Entry of the archive thread (see ThreadArchiver): an Archiver on a connection of its own to the
 * SQLite file, running what the owning thread asks, one call at a time as asked.
 */
import { MessagePort, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { openSqliteArchiver } from './open-archiver';
import type { ArchiveThreadData, FromArchiveThread, ToArchiveThread } from './thread-archiver';

function main(port: MessagePort, data: ArchiveThreadData): void {
  const access = openSqliteArchiver(data.path, {
    batchTasks: data.batchTasks,
    companionStreams: (taskId) => data.companionPrefixes.map((prefix) => `${prefix}${taskId}`),
    receiptStreamPrefixes: data.receiptPrefixes,
    busyTimeoutMs: data.busyTimeoutMs,
  });
  const post = (m: FromArchiveThread) => port.postMessage(m);
  /** per run: resumes it after its pause, with whether to stop there */
  const resumes = new Map<number, (stop: boolean) => void>();
  const stops = new Set<number>();
  const answer = (id: number, work: Promise<Extract<FromArchiveThread, { type: 'done' }>['value']>) =>
    work.then(
      (value) => post({ type: 'done', id, value }),
      (err: Error) =>
        post({ type: 'failed', id, error: { name: err.name, message: err.message, stack: err.stack } }),
    );

  port.on('message', (m: ToArchiveThread) => {
    switch (m.type) {
      case 'run':
        void answer(
          m.id,
          access.archiver
            .run(m.policy, m.now, {
              ...m.options,
              ...(m.pauses
                ? {
                    pause: (segment) =>
                      new Promise<void>((resolve) => {
                        resumes.set(m.id, (stop) => {
                          if (stop) stops.add(m.id);
                          resolve();
                        });
                        post({ type: 'paused', id: m.id, segment });
                      }),
                    stopped: () => stops.has(m.id),
                  }
                : {}),
            })
            .finally(() => stops.delete(m.id)),
        );
        return;
      case 'resume':
        resumes.get(m.id)?.(m.stop);
        resumes.delete(m.id);
        return;
      case 'reclaim':
        void answer(m.id, access.archiver.reclaim(m.pages));
        return;
      case 'close':
        void access.close().finally(() => {
          post({ type: 'closed' });
          port.close();
        });
        return;
    }
  });
}

if (!isMainThread && parentPort) main(parentPort, (workerData as { data: ArchiveThreadData }).data);
