import { pino, type Logger } from 'pino';
import type { LogLevel } from './config.js';

/** JSON logs; credentials are redacted wherever they could appear. */
export function createLogger(level: LogLevel): Logger {
  return pino({
    level,
    base: { service: 'orders-api' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'res.headers["set-cookie"]',
        '*.password',
        '*.access_token',
        '*.id_token',
        '*.refresh_token',
        '*.code_verifier',
      ],
      censor: '[redacted]',
    },
  });
}
