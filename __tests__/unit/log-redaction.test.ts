import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { createLogger } from '../../src/logger.js';

const SECRET = 'Hunter2-SECRET-PW';

/** The lines a logger at `level` writes. */
function capture(level: 'debug' | 'info' = 'debug') {
  const lines: string[] = [];
  const logger = createLogger(level, { destination: { write: (line: string) => void lines.push(line) } });
  return { logger, lines };
}

/** An error as body-parser makes it: the raw body it refused rides along as `body`. */
const bodyParserError = () =>
  Object.assign(new Error('too many parameters'), {
    type: 'parameters.too.many',
    status: 413,
    body: `username=carol&password=${SECRET}`,
  });

describe('a logged error never carries what the client sent', () => {
  test('body and rawBody are dropped from err and error, at any depth, and the error itself is left as it was', () => {
    const { logger, lines } = capture();
    const top = bodyParserError();
    const nested = Object.assign(new Error('wrapped'), {
      original: bodyParserError(),
      details: { rawBody: Buffer.from(SECRET), body: SECRET, kept: 'visible' },
      cause: bodyParserError(),
    });
    const aggregate = new AggregateError([bodyParserError(), bodyParserError()], 'several');
    logger.error({ err: top }, 'one');
    logger.error({ err: nested }, 'nested');
    logger.error({ error: aggregate }, 'aggregate');
    logger.warn({ err: { body: SECRET, message: 'a plain object' } }, 'plain');
    assert.equal(lines.length, 4);
    assert.deepEqual(
      lines.filter((line) => line.includes(SECRET)),
      [],
    );
    const [one, wrapped] = lines.map((line) => JSON.parse(line) as { err: Record<string, unknown> });
    assert.deepEqual([one!.err.type, one!.err.message, one!.err.status], ['Error', 'too many parameters', 413]);
    assert.equal((wrapped!.err.details as Record<string, unknown>).kept, 'visible');
    assert.equal((wrapped!.err.original as Record<string, unknown>).message, 'too many parameters');
    assert.equal(top.body, `username=carol&password=${SECRET}`);
  });

  test('a password member is redacted wherever a logged object carries it', () => {
    const { logger, lines } = capture('info');
    logger.info({ form: { username: 'carol', password: SECRET } }, 'form');
    assert.equal(lines.length, 1);
    assert.doesNotMatch(lines[0]!, new RegExp(SECRET));
    assert.match(lines[0]!, /"password":"\[redacted\]"/);
  });
});
