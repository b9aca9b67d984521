/** Events a subscriber may have waiting before it counts as too slow and is dropped. */
export const SUBSCRIBER_BUFFER = 256;

/** A pull-based queue over pushed events: bounded, so one slow consumer cannot hold memory hostage. */
export function boundedStream<T>(max: number, onOverflow: () => void, onClose: () => void) {
  const buffer: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | null = null;
  let closed = false;

  const close = () => {
    if (closed) return;
    closed = true;
    buffer.length = 0;
    onClose();
    waiting?.({ value: undefined, done: true });
    waiting = null;
  };

  const iterator: AsyncIterableIterator<T> = {
    next() {
      if (buffer.length) return Promise.resolve({ value: buffer.shift()!, done: false });
      if (closed) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => (waiting = resolve));
    },
    return() {
      close();
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };

  return {
    iterator,
    close,
    push(value: T) {
      if (closed) return;
      if (waiting) {
        const resolve = waiting;
        waiting = null;
        resolve({ value, done: false });
      } else if (buffer.length < max) {
        buffer.push(value);
      } else {
        close();
        onOverflow();
      }
    },
  };
}
