import pino, { DestinationStream, Logger } from 'pino';

/**
 * JSON logs. Request bodies are never logged; the redact list is a second
 * line of defence should a header or body object reach a log call.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'runledger' },
      redact: {
        paths: [
          'req.headers.authorization',
          'headers.authorization',
          'authorization',
          'token',
          '*.token',
          'secret',
          '*.secret',
          'body',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
