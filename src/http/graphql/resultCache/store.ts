import type { PreparedDocument } from '../../pipeline/index.js';
import type { DocumentNode, OperationDefinitionNode } from 'graphql';
import { LRUCache } from 'lru-cache';
import type { OrderEvent } from '../../../domain/model.js';

/** A stored response. */
export interface Entry {
  /** `data`, serialized once, as the miss sent it. */
  readonly data: string;
  /** Extensions other than `cost` (none today), serialized with the cost spliced in on every hit. */
  readonly extensions: Record<string, unknown> | undefined;
  readonly headers: readonly (readonly [string, string])[];
  /** Kept so that a hit is costed and charged exactly as a miss is. */
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  /** The document's prepared record (its deprecations, the operation's fixed cost), when it has one. */
  readonly record: PreparedDocument | undefined;
  readonly variables: Record<string, unknown> | undefined;
  /** Which order events flush it; null: none can change it (TTL only). */
  readonly partition: string | null;
  /** A PUBLIC response carries no rate-limit headers, as on a miss. */
  readonly public: boolean;
  readonly size: number;
}

/** Bytes an entry is counted for: its strings as UTF-16, the document's source, and a fixed overhead. */
export function sizeOf(
  key: string,
  data: string,
  extensions: Record<string, unknown> | undefined,
  document: DocumentNode,
  headers: readonly (readonly [string, string])[],
): number {
  return (
    2 * (data.length + key.length) +
    (extensions ? 2 * JSON.stringify(extensions).length : 0) +
    (document.loc?.source.body.length ?? 0) +
    headers.reduce((n, [k, v]) => n + 2 * (k.length + v.length), 0) +
    512
  );
}

/**
 * The stored responses, in memory per replica: least recently used out first past `maxBytes`, none older than
 * `ttlSeconds`, and each filed under the partition order events flush ('staff', 'c:<customer id>', or 'any',
 * flushed by every event). The epoch counts order events: a result computed across one may predate the change.
 */
export function createEntryStore(options: { readonly maxBytes: number; readonly ttlSeconds: number }) {
  const byPartition = new Map<string, Set<string>>();
  const entries = new LRUCache<string, Entry>({
    maxSize: options.maxBytes,
    // One response may take at most an eighth of the cache, so a few large ones cannot empty it.
    maxEntrySize: Math.max(1, Math.floor(options.maxBytes / 8)),
    sizeCalculation: (entry) => entry.size,
    ttl: options.ttlSeconds * 1000,
    // Expired entries are found by a lookup or pushed out by size; no timers.
    ttlAutopurge: false,
    dispose: (entry, key) => {
      if (entry.partition === null) return;
      const keys = byPartition.get(entry.partition);
      keys?.delete(key);
      if (keys?.size === 0) byPartition.delete(entry.partition);
    },
  });
  /** Bumped by every order event. */
  let epoch = 0;
  /** Events this replica flushed for at commit; the bus then brings them again and they are skipped. */
  const flushedLocally = new Set<string>();

  return {
    epoch: () => epoch,
    get: (key: string) => entries.get(key),

    /** Stores an entry under its key and partition; false when it was not kept (larger than an entry may be). */
    put(key: string, entry: Entry): boolean {
      entries.set(key, entry);
      const stored = entries.has(key);
      if (entry.partition !== null && stored) {
        let keys = byPartition.get(entry.partition);
        if (!keys) byPartition.set(entry.partition, (keys = new Set()));
        keys.add(key);
      }
      return stored;
    },

    /**
     * An order changed: every entry that could hold it goes (staff's, its customer's, and those whose owner is not
     * known), and the epoch moves on. `local` marks the flush at commit on the replica that made the change; the bus
     * then brings the same event, which needs no second flush. Returns the entries removed, or null when skipped.
     */
    flush(event: OrderEvent, local: boolean): number | null {
      if (local) {
        if (flushedLocally.size >= 1000) flushedLocally.delete(flushedLocally.values().next().value!);
        flushedLocally.add(event.id);
      } else if (flushedLocally.delete(event.id)) return null;
      epoch++;
      let removed = 0;
      for (const partition of ['staff', 'any', `c:${event.order.customerId}`]) {
        const keys = byPartition.get(partition);
        if (!keys) continue;
        for (const key of [...keys]) {
          if (entries.delete(key)) removed++;
        }
        byPartition.delete(partition);
      }
      return removed;
    },

    entries: () => entries.size,
    bytes: () => entries.calculatedSize,
  };
}

export type EntryStore = ReturnType<typeof createEntryStore>;
