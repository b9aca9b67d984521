import type { Entry } from './store.js';

/**
 * One execution of a key that others may wait for: settled with the stored entry; 'stale' when an order event made
 * its result unfit to store (waiters look again); or nothing when it was not storable at all (waiters execute).
 */
export type Outcome = Entry | 'stale' | undefined;

export interface Flight {
  /** The store's epoch when the execution began: only a flight that began after the last order event may answer. */
  readonly epoch: number;
  readonly done: Promise<Outcome>;
  settle(outcome: Outcome): void;
}

/**
 * Single flight: identical requests that arrive while one of them executes wait for its result instead of executing
 * too. Also remembers which operations are mutations, so that their requests skip the cache entirely.
 */
export function createFlights() {
  const flights = new Map<string, Flight>();
  /**
   * Operations (document hash and operation name) seen to be mutations: identical mutations sent at once must not
   * wait for one another. Bounded; one that falls out is learnt again.
   */
  const mutations = new Set<string>();
  let waitingNow = 0;

  return {
    /** The execution of this key now under way, if any. */
    current: (key: string) => flights.get(key),

    /** Starts the one execution of a key, at the store's current epoch. */
    start(key: string, epoch: number): Flight {
      let resolve!: (outcome: Outcome) => void;
      const done = new Promise<Outcome>((r) => (resolve = r));
      const flight: Flight = {
        epoch,
        done,
        settle(outcome) {
          if (flights.get(key) === flight) flights.delete(key);
          resolve(outcome);
        },
      };
      flights.set(key, flight);
      return flight;
    },

    /** The outcome of a flight, counted as a request waiting until it settles. */
    wait(flight: Flight): Promise<Outcome> {
      waitingNow++;
      return flight.done.finally(() => waitingNow--);
    },

    /** Requests waiting now, for the gauge. */
    waiting: () => waitingNow,

    isMutation: (operation: string) => mutations.has(operation),
    rememberMutation(operation: string) {
      if (mutations.size >= 1000) mutations.delete(mutations.values().next().value!);
      mutations.add(operation);
    },
  };
}

export type Flights = ReturnType<typeof createFlights>;
