import autocannon from 'autocannon';
import { recordRun } from './load.js';

/** Reads of the staff list of 100 and customer writes, 19 to 1: the 95 % reads / 5 % writes. */
export const MIX_READS_PER_WRITE = 19;
export const MIX_READ_QUERY = '{ recentOrders(first: 100) { id status customer { id name } } }';
const WRITE_QUERY = 'mutation { createOrder(input: { items: [{ sku: "KB-001", qty: 1 }] }) { id } }';

export interface MixStats {
  readonly responses: number;
  readonly reads: number;
  readonly writes: number;
  readonly seconds: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
  /** 200 responses whose body held GraphQL errors, or a write that returned no order. */
  readonly failed: number;
  /** Reads sent after some write's response had arrived (so they must show that write). */
  readonly checkedReads: number;
  /**
   * Of those, reads that did not show the newest write answered before they were sent: responses older than a
   * commit the client had already seen. The result cache must make this 0 on one replica.
   */
  readonly staleReads: number;
  /** For stale reads: how long after that write's answer the stale answer came (0 when none). */
  readonly maxStaleMs: number;
  readonly cutShort: boolean;
}

/**
 * A closed loop of `connections` keep-alive connections, each sending 19 reads of the staff list of 100 (carol) and
 * then one createOrder (alice), over and over. Staleness is checked on every read: the newest order whose
 * createOrder response had arrived before the read was sent must be in the list (fewer than 100 writes can follow it
 * during one read, so it cannot have been pushed out).
 */
export function runMix(opts: {
  url: string;
  staffToken: string;
  writerToken: string;
  connections: number;
  seconds: number;
  amount?: number;
}): Promise<MixStats> {
  const run = recordRun(opts.seconds);
  const { latencies } = run;
  let reads = 0;
  let writes = 0;
  let failed = 0;
  let checkedReads = 0;
  let staleReads = 0;
  let maxStaleMs = 0;
  let newest: { id: string; at: number } | null = null;

  type Ctx = { expect?: { id: string; at: number } | null };
  const json = (token: string) => ({ 'content-type': 'application/json', authorization: `Bearer ${token}` });
  const read = {
    method: 'POST' as const,
    path: '/graphql',
    headers: json(opts.staffToken),
    body: JSON.stringify({ query: MIX_READ_QUERY }),
    setupRequest: (req: object, context: Ctx) => {
      context.expect = newest;
      return req;
    },
    onResponse: (status: number, body: string, context: Ctx) => {
      reads++;
      if (status !== 200 || body.includes('"errors"')) {
        failed++;
        return;
      }
      const expect = context.expect;
      if (!expect) return;
      checkedReads++;
      if (!body.includes(expect.id)) {
        staleReads++;
        maxStaleMs = Math.max(maxStaleMs, performance.now() - expect.at);
      }
    },
  };
  const write = {
    method: 'POST' as const,
    path: '/graphql',
    headers: json(opts.writerToken),
    body: JSON.stringify({ query: WRITE_QUERY }),
    onResponse: (status: number, body: string) => {
      writes++;
      const id = status === 200 ? /"createOrder":\{"id":"(ord_[^"]+)"/.exec(body)?.[1] : undefined;
      if (!id) {
        failed++;
        return;
      }
      newest = { id, at: performance.now() };
    },
  };

  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: opts.url,
        requests: [...Array.from({ length: MIX_READS_PER_WRITE }, () => read), write],
        connections: opts.amount ? Math.min(opts.connections, opts.amount) : opts.connections,
        pipelining: 1,
        ...(opts.amount ? { amount: opts.amount } : { duration: opts.seconds }),
        timeout: 10,
        sampleInt: 100,
      } as autocannon.Options,
      (error, result) => {
        run.finish();
        if (error) return reject(error);
        const { responses, seconds, cutShort } = run;
        resolve({
          responses,
          reads,
          writes,
          seconds,
          rps: seconds > 0 ? responses / seconds : 0,
          p50Ms: responses ? latencies.percentile(50) / 1000 : 0,
          p99Ms: responses ? latencies.percentile(99) / 1000 : 0,
          non2xx: result.non2xx,
          errors: result.errors,
          failed,
          checkedReads,
          staleReads,
          maxStaleMs,
          cutShort,
        });
      },
    );
    run.watch(instance);
  });
}
