/** The counters the bench reads from a server's Prometheus endpoint (the app's or the floor's). */
export interface Counters {
  /** sql_statements_total */
  readonly sql: number;
  /** http_requests_total{route="/graphql"}, summed over methods and statuses. */
  readonly graphqlRequests: number;
  /** graphql_errors_total over all codes: errors that ride inside 200 responses (0 for the floor). */
  readonly graphqlErrors: number;
  /** result_cache_hits_total and result_cache_misses_total (0 without RESULT_CACHE=on, and for the floor). */
  readonly cacheHits: number;
  readonly cacheMisses: number;
}

export async function readCounters(baseUrl: string): Promise<Counters> {
  const res = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`${baseUrl}/metrics answered ${res.status}`);
  const samples = parsePrometheus(await res.text());
  const sum = (name: string, labels: Record<string, string> = {}) =>
    samples
      .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
      .reduce((total, s) => total + s.value, 0);
  if (!samples.some((s) => s.name === 'sql_statements_total'))
    throw new Error(`${baseUrl}/metrics has no sql_statements_total`);
  return {
    sql: sum('sql_statements_total'),
    graphqlRequests: sum('http_requests_total', { route: '/graphql' }),
    graphqlErrors: sum('graphql_errors_total'),
    cacheHits: sum('result_cache_hits_total'),
    cacheMisses: sum('result_cache_misses_total'),
  };
}

export function difference(after: Counters, before: Counters): Counters {
  return {
    sql: after.sql - before.sql,
    graphqlRequests: after.graphqlRequests - before.graphqlRequests,
    graphqlErrors: after.graphqlErrors - before.graphqlErrors,
    cacheHits: after.cacheHits - before.cacheHits,
    cacheMisses: after.cacheMisses - before.cacheMisses,
  };
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Enough of the text exposition format for counters: `name{a="b",c="d"} value`. */
function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}
