import { databaseUnavailable } from '../domain/errors.js';

/**
 * The database circuit: "down" told apart from "busy". The adapter trips it when a connection attempt fails because
 * the server is not there (refused, unresolvable, a TCP handshake unanswered, the server saying it cannot take
 * connections now): from then on every call fails at once with the domain's SERVICE_UNAVAILABLE (503 +
 * Retry-After), callers already waiting for a connection included, instead of each making its own attempt and
 * waiting for it. A probe tries to connect every `retryMs` in the background; the first that succeeds closes it. A
 * slow connection (a busy pool, a loaded server) is not the database being down, and the adapter does not trip it.
 */
export function databaseCircuit(opts: {
  /** One real round trip to the database; rejects when it is still down. */
  probe: () => Promise<void>;
  retryMs: number;
  onChange?: (open: boolean, cause?: unknown) => void;
}) {
  let openedBy: unknown = undefined;
  let open = false;
  let probing: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  /** Those waiting for a connection: each is failed at once when the circuit opens. */
  const waiters = new Set<(error: Error) => void>();

  const scheduleProbe = () => {
    if (stopped) return;
    probing = setTimeout(() => {
      opts.probe().then(
        () => {
          open = false;
          openedBy = undefined;
          probing = undefined;
          opts.onChange?.(false);
        },
        (error: unknown) => {
          openedBy = error;
          scheduleProbe();
        },
      );
    }, opts.retryMs).unref();
  };

  return {
    isOpen: () => open,
    /** Throws SERVICE_UNAVAILABLE while the circuit is open. */
    check(): void {
      if (open) throw databaseUnavailable(openedBy);
    },
    /** A connection attempt failed because the database is not there: open, and fail everyone waiting. */
    trip(cause: unknown): void {
      if (open || stopped) return;
      open = true;
      openedBy = cause;
      opts.onChange?.(true, cause);
      for (const fail of [...waiters]) fail(databaseUnavailable(cause));
      scheduleProbe();
    },
    /**
     * Waits for `connecting` unless the circuit opens first: then the caller fails at once, and what `connecting`
     * brings later is handed to `abandon` (a connection to give back).
     */
    wait<T>(connecting: Promise<T>, abandon: (value: T) => void): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const fail = (error: Error) => {
          waiters.delete(fail);
          reject(error);
        };
        waiters.add(fail);
        connecting.then(
          (value) => {
            if (waiters.delete(fail)) resolve(value);
            else abandon(value);
          },
          (error: unknown) => {
            if (waiters.delete(fail)) reject(error);
          },
        );
      });
    },
    stop(): void {
      stopped = true;
      clearTimeout(probing);
    },
  };
}

export type DatabaseCircuit = ReturnType<typeof databaseCircuit>;
