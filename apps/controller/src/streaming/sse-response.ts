import type { Request, Response } from 'express';
import { Follow } from './follow-events';

export const SSE_HEARTBEAT_MS = 15_000;
/** bytes of a stream written and not yet sent before the writer waits for the client to take them */
const MAX_UNSENT_BYTES = 1024 * 1024;

/**
 * A server-sent-events response that serves one follow of the log: the headers go out at once, a
 * keep-alive comment every SSE_HEARTBEAT_MS, writes are paced by the client past MAX_UNSENT_BYTES,
 * and the follow stops when the client goes. The streams being served are kept in `open`, so the
 * application stops them on shutdown (the HTTP server waits for open responses).
 */
export class SseResponse {
  private closed = false;
  private follow: Follow | null = null;

  constructor(
    req: Request,
    private readonly res: Response,
  ) {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    res.flushHeaders();
    req.on('close', () => {
      this.closed = true;
      this.follow?.stop();
    });
  }

  /** Sends `text`; resolves once the client has taken enough of what was sent for the next page to be read. */
  async write(text: string): Promise<void> {
    if (this.closed || text === '') return;
    this.res.write(text);
    if (this.res.writableLength > MAX_UNSENT_BYTES && !this.closed)
      await new Promise<void>((resolve) => {
        this.res.once('drain', resolve);
        this.res.once('close', resolve);
      });
  }

  /** For a follow's onOverflow and onError: the client is cut off, it reconnects with Last-Event-ID. */
  readonly abort = (): void => {
    this.res.destroy();
  };

  /** Serves until the follow ends, then ends the response (unless the client already left). */
  async serve(follow: Follow, open: Set<Follow>): Promise<void> {
    this.follow = follow;
    if (this.closed) follow.stop();
    open.add(follow);
    const heartbeat = setInterval(() => this.res.write(': keep-alive\n\n'), SSE_HEARTBEAT_MS);
    await follow.done;
    open.delete(follow);
    clearInterval(heartbeat);
    if (!this.closed) this.res.end();
  }
}
