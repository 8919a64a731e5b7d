import { Duplex } from 'node:stream';
import { ErrorBody } from './error-body';

/**
 * Requests Node's HTTP parser refuses before the app sees them (request line or
 * headers over the limit, broken framing) get the API's JSON error body too;
 * Node's own answer is a bare status line.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, body]: [string, ErrorBody] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [
          '431 Request Header Fields Too Large',
          { error: 'headers_too_large', message: 'request line or headers too large', details: null },
        ]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [
            '408 Request Timeout',
            { error: 'request_timeout', message: 'request not received in time', details: null },
          ]
        : ['400 Bad Request', { error: 'bad_request', message: 'malformed HTTP request', details: null }];
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
  );
}
