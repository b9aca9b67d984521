import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import { boundedStream } from '../../src/http/realtime/index.js';

describe('a subscriber buffer', () => {
  test('hands values to a waiting reader, then buffers up to the bound', async () => {
    const stream = boundedStream<number>(
      2,
      () => assert.fail('no overflow'),
      () => undefined,
    );
    const waiting = stream.iterator.next();
    stream.push(1);
    assert.deepEqual(await waiting, { value: 1, done: false });
    stream.push(2);
    stream.push(3);
    assert.deepEqual(await stream.iterator.next(), { value: 2, done: false });
    assert.deepEqual(await stream.iterator.next(), { value: 3, done: false });
  });

  test('a reader that falls more than the bound behind is cut off, once, and its buffer freed', async () => {
    let overflows = 0;
    let closes = 0;
    const stream = boundedStream<number>(
      3,
      () => overflows++,
      () => closes++,
    );
    for (let i = 0; i < 10; i++) stream.push(i);
    assert.equal(overflows, 1);
    assert.equal(closes, 1);
    assert.deepEqual(await stream.iterator.next(), { value: undefined, done: true });
  });

  test('return() ends the stream and releases whoever listens', async () => {
    let closes = 0;
    const stream = boundedStream<number>(
      3,
      () => undefined,
      () => closes++,
    );
    const pending = stream.iterator.next();
    await stream.iterator.return!();
    assert.deepEqual(await pending, { value: undefined, done: true });
    assert.equal(closes, 1);
  });
});
