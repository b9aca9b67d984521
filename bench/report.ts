import os from 'node:os';
import type { LoadStats } from './load.js';
import type { Rounds } from './rounds.js';

/** One server's run of one scenario. */
export interface SideResult {
  readonly stats: LoadStats;
  /** Requests the server itself counted during the measured run (its /metrics). */
  readonly served: number;
  readonly sqlStatements: number;
  readonly sqlPerRequest: number;
  /** GraphQL errors inside responses during the run (the app's graphql_errors_total). */
  readonly graphqlErrors: number;
  /** The server process's CPU time (all its threads) per request. */
  readonly cpuUsPerRequest: number;
  readonly cpu: CpuShares;
  readonly profile?: string;
}

/** Who had the machine during a measured run, in percent of one core (2 cores = 200 %). */
export interface CpuShares {
  readonly windowMs: number;
  readonly serverPercent: number;
  /** Every PostgreSQL process on the machine (including other users' backends, if any). */
  readonly postgresPercent: number | null;
  /** autocannon, in the bench's own process. */
  readonly loadGeneratorPercent: number;
  readonly machinePercent: number;
  /** The rest: other processes on the machine. High values mean the numbers are noisy. */
  readonly otherPercent: number;
}

export interface ScenarioResult {
  readonly name: string;
  readonly description: string;
  readonly app: SideResult;
  readonly floor: SideResult;
  /** app req/s ÷ floor req/s: 1 is as fast as the floor. */
  readonly throughputRatio: number;
  /** app p99 ÷ floor p99: 1 is as fast as the floor, above 1 slower. */
  readonly p99Ratio: number;
  /**
   * app CPU µs per request ÷ floor CPU µs per request: how much more work the app does for the same
   * answer. Steadier than req/s on a shared machine, where other processes take cores away.
   */
  readonly cpuPerRequestRatio: number;
  /** Whether app and floor returned byte-identical bodies in the correctness check. */
  readonly identicalBodies: boolean;
  /** Anything that makes this row untrustworthy (errors, mismatches). Empty when clean. */
  readonly problems: readonly string[];
  /** With --peers: the other GraphQL servers (bench/peers/) on the same request, measured right after the floor. */
  readonly peers?: readonly PeerResult[];
  /** With --rounds: every round's CPU µs/req and req/s of the app, the floor and the target peers (bench/rounds.ts). */
  readonly rounds?: Rounds;
}

/** A peer GraphQL server's run of one scenario, beside the app and the floor. */
export interface PeerResult {
  readonly name: string;
  readonly result: SideResult;
  /** peer req/s ÷ floor req/s */
  readonly throughputRatio: number;
  /** peer CPU µs/req ÷ floor CPU µs/req */
  readonly cpuPerRequestRatio: number;
}

export function problemsOf(side: 'app' | 'floor', r: SideResult): string[] {
  const s = r.stats;
  const problems: string[] = [];
  if (s.non2xx) problems.push(`${side}: ${s.non2xx} non-2xx (${JSON.stringify(s.statusCodes)})`);
  if (s.errors) problems.push(`${side}: ${s.errors} connection errors/timeouts`);
  if (s.mismatches) problems.push(`${side}: ${s.mismatches} responses differed from the checked body`);
  if (r.graphqlErrors) problems.push(`${side}: ${r.graphqlErrors} GraphQL errors inside responses`);
  if (!s.responses) problems.push(`${side}: no responses`);
  if (s.cutShort) problems.push(`${side}: stopped by the time limit, requests were abandoned`);
  return problems;
}

const f0 = (n: number) => Math.round(n).toLocaleString('en-US');
const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

function table(header: string[][], rows: string[][]): string {
  const all = [...header, ...rows];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const rule = widths.map((w) => '─'.repeat(w)).join('  ');
  return [...header.map(line), rule, ...rows.map(line)].join('\n');
}

export function renderTables(results: readonly ScenarioResult[]): string {
  const main = table(
    [
      ['', 'req/s', 'req/s', 'req/s', 'p50 ms', 'p50 ms', 'p99 ms', 'p99 ms', 'p99', 'SQL/req', 'SQL/req', ''],
      ['scenario', 'app', 'floor', 'app/floor', 'app', 'floor', 'app', 'floor', 'app/floor', 'app', 'floor', 'status'],
    ],
    results.map((r) => [
      r.name,
      f0(r.app.stats.rps),
      f0(r.floor.stats.rps),
      f2(r.throughputRatio),
      f2(r.app.stats.p50Ms),
      f2(r.floor.stats.p50Ms),
      f2(r.app.stats.p99Ms),
      f2(r.floor.stats.p99Ms),
      f2(r.p99Ratio),
      f2(r.app.sqlPerRequest),
      f2(r.floor.sqlPerRequest),
      r.problems.length ? 'ERRORS' : 'ok',
    ]),
  );
  const work = table(
    [
      [
        'scenario',
        'server',
        'requests',
        'CPU µs/req',
        'app/floor',
        'server %',
        'postgres %',
        'loadgen %',
        'other %',
        'machine %',
      ],
    ],
    results.flatMap((r) =>
      (['app', 'floor'] as const).map((side) => {
        const x = r[side];
        return [
          side === 'app' ? r.name : '',
          side,
          f0(x.served),
          f0(x.cpuUsPerRequest),
          side === 'app' ? f1(r.cpuPerRequestRatio) : '',
          f0(x.cpu.serverPercent),
          x.cpu.postgresPercent === null ? '–' : f0(x.cpu.postgresPercent),
          f0(x.cpu.loadGeneratorPercent),
          f0(x.cpu.otherPercent),
          f0(x.cpu.machinePercent),
        ];
      }),
    ),
  );
  const problems = results.flatMap((r) => r.problems.map((p) => `  ${r.name}: ${p}`));
  const withPeers = results.filter((r) => r.peers?.length);
  const peers = withPeers.length
    ? table(
        [['scenario', 'server', 'req/s', 'vs floor', 'app vs it', 'CPU µs/req', 'vs floor', 'p99 ms', 'other %']],
        withPeers.flatMap((r) => [
          [
            r.name,
            'app',
            f0(r.app.stats.rps),
            f2(r.throughputRatio),
            '',
            f0(r.app.cpuUsPerRequest),
            f2(r.cpuPerRequestRatio),
            f2(r.app.stats.p99Ms),
            f0(r.app.cpu.otherPercent),
          ],
          [
            '',
            'floor',
            f0(r.floor.stats.rps),
            '1.00',
            '',
            f0(r.floor.cpuUsPerRequest),
            '1.00',
            f2(r.floor.stats.p99Ms),
            f0(r.floor.cpu.otherPercent),
          ],
          ...r.peers!.map((p) => [
            '',
            p.name,
            f0(p.result.stats.rps),
            f2(p.throughputRatio),
            f2(p.result.stats.rps ? r.app.stats.rps / p.result.stats.rps : 0),
            f0(p.result.cpuUsPerRequest),
            f2(p.cpuPerRequestRatio),
            f2(p.result.stats.p99Ms),
            f0(p.result.cpu.otherPercent),
          ]),
        ]),
      )
    : '';
  return [
    main,
    '',
    'Who had the CPU during each measured run (% of one core; the machine has ' +
      `${os.cpus().length}; "other" is everything else running on it):`,
    work,
    ...(peers
      ? [
          '',
          'Peers (bench/peers/, no auth), measured right after the floor; "app vs it" = app req/s ÷ its req/s:',
          peers,
        ]
      : []),
    ...(problems.length ? ['', 'FLAGGED — these rows are not trustworthy:', ...problems] : []),
  ].join('\n');
}
