/**
 * The table of issues 34, 35 and 36's speed targets, from one `npm run bench -- --peers --rounds <n>` run, and the
 * regression check against bench/results/baseline.json (`--check`, `--write-baseline`).
 *
 * The check compares the list of 100's **CPU efficiency**, floor CPU µs/req ÷ app CPU µs/req (1.0 = the app costs
 * what the floor costs), rather than the req/s ratio: on this shared 2-core machine another process taking a core
 * moves req/s by far more than it moves CPU time per request, and both servers are measured in the same run. With
 * --rounds it is the inverse of the median of the rounds' app/floor ratios.
 */
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import type { ScenarioResult } from './report.js';
import { median, ratioOf, type RoundSide } from './rounds.js';

export const LIST = 'recentOrders-100';
export const ONE = 'order-by-id';
export const FILTERED = 'orders-filtered-50';
/** How far below the baseline's figure the check lets the list of 100 fall. */
export const CHECK_TOLERANCE = 0.15;

export interface Baseline {
  readonly date: string;
  readonly commit?: string;
  readonly loadAverage: number[];
  readonly scenario: string;
  /** floor CPU µs/req ÷ app CPU µs/req: the figure the check compares. */
  readonly cpuEfficiency: number;
  /** For the record: app req/s ÷ floor req/s in the same run. */
  readonly throughputRatio: number;
  readonly appCpuUsPerRequest: number;
  readonly floorCpuUsPerRequest: number;
}

/** floor CPU µs/req ÷ app CPU µs/req, over the rounds' median where there are rounds. */
function cpuEfficiencyOf(r: ScenarioResult): number {
  const over = r.rounds && r.rounds.length > 1 ? ratioOf(r.rounds, 'app', 'floor', 'cpuUsPerRequest') : null;
  if (over) return over.median ? 1 / over.median : 0;
  return r.app.cpuUsPerRequest ? r.floor.cpuUsPerRequest / r.app.cpuUsPerRequest : 0;
}

export function baselineOf(results: readonly ScenarioResult[], commit?: string): Baseline {
  const r = results.find((x) => x.name === LIST);
  if (!r) throw new Error(`--write-baseline needs the ${LIST} scenario`);
  return {
    date: new Date().toISOString(),
    ...(commit ? { commit } : {}),
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    scenario: LIST,
    cpuEfficiency: cpuEfficiencyOf(r),
    throughputRatio: r.throughputRatio,
    appCpuUsPerRequest: r.app.cpuUsPerRequest,
    floorCpuUsPerRequest: r.floor.cpuUsPerRequest,
  };
}

export async function writeBaseline(file: string, baseline: Baseline): Promise<void> {
  await writeFile(file, JSON.stringify(baseline, null, 2) + '\n');
}

/** Failures of the regression check (empty: passed), each a sentence. */
export async function checkAgainstBaseline(file: string, results: readonly ScenarioResult[]): Promise<string[]> {
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) return [`no baseline at ${file}: run with --write-baseline first`];
  const baseline = JSON.parse(text) as Baseline;
  const r = results.find((x) => x.name === LIST);
  if (!r) return [`the check needs the ${LIST} scenario (leave it in --only)`];
  if (r.problems.length) return [`${LIST}: the run had errors (${r.problems.join('; ')})`];
  const now = cpuEfficiencyOf(r);
  const least = baseline.cpuEfficiency * (1 - CHECK_TOLERANCE);
  return now < least
    ? [
        `${LIST}: CPU efficiency against the floor is ${now.toFixed(3)} (first round: app ` +
          `${Math.round(r.app.cpuUsPerRequest)} µs/req, floor ${Math.round(r.floor.cpuUsPerRequest)}), more than ${CHECK_TOLERANCE * 100} % below the baseline's ` +
          `${baseline.cpuEfficiency.toFixed(3)} (${baseline.date}); the least that passes is ${least.toFixed(3)}`,
      ]
    : [];
}

/** The fan-out figures the table needs, from the fan-out bench's result. */
export interface FanoutFigures {
  readonly date: string;
  readonly loadAverage: number[];
  readonly compiled: boolean;
  readonly appMsPerEvent: number;
  readonly floorMsPerEvent: number;
  readonly appLastP99Ms: number;
  readonly floorLastP99Ms: number;
}

const f2 = (n: number) => n.toFixed(2);
const f0 = (n: number) => Math.round(n).toLocaleString('en-US');
const meets = (ok: boolean) => (ok ? 'yes' : 'no');

/**
 * A ratio of the app's figure to another side's: the median of the rounds' ratios with --rounds, else the one
 * run's; with the range of the rounds, and the two sides' own medians for the table.
 */
function judged(r: ScenarioResult, against: string, figure: keyof RoundSide) {
  const one = (side: string) =>
    side === 'app' ? r.app : side === 'floor' ? r.floor : r.peers?.find((p) => p.name === side)?.result;
  const value = (side: string) => {
    const x = one(side);
    return x ? (figure === 'rps' ? x.stats.rps : x.cpuUsPerRequest) : null;
  };
  const over = r.rounds && r.rounds.length > 1 ? ratioOf(r.rounds, 'app', against, figure) : null;
  if (over) {
    const sideMedian = (side: string) => median(r.rounds!.map((round) => round[side]![figure]));
    const range = `${f2(Math.min(...over.each))}–${f2(Math.max(...over.each))}`;
    return { ours: sideMedian('app'), theirs: sideMedian(against), ratio: over.median, range, n: over.each.length };
  }
  const [ours, theirs] = [value('app'), value(against)];
  if (ours === null || theirs === null || !theirs) return null;
  return { ours, theirs, ratio: ours / theirs, range: '', n: 1 };
}

/** The speed targets of issues 34, 35 and 36, from this run (medians of its rounds with --rounds). */
export function renderTargets(results: readonly ScenarioResult[], fanout: FanoutFigures | null): string {
  const rows: string[][] = [['figure', 'ours', 'against', 'ratio', 'rounds', 'target', 'met']];
  const row = (
    figure: string,
    name: string,
    against: string,
    measure: keyof RoundSide,
    test: (ratio: number) => boolean,
    target: string,
  ) => {
    const r = results.find((x) => x.name === name);
    const j = r && judged(r, against, measure);
    if (!j) return;
    const ratio = measure === 'rps' ? f2(j.ratio) : `${f2(j.ratio)}×`;
    rows.push([
      figure,
      f0(j.ours),
      f0(j.theirs),
      ratio,
      j.n > 1 ? `${j.n}: ${j.range}` : '1',
      target,
      meets(test(j.ratio)),
    ]);
  };
  row('36: list of 100, req/s vs Mercurius + jit', LIST, 'mercurius+jit', 'rps', (x) => x >= 1, '≥ 1.00');
  row('36: list of 100, CPU µs/req vs floor', LIST, 'floor', 'cpuUsPerRequest', (x) => x <= 1.55, '≤ 1.55×');
  row('36: one order, req/s vs floor', ONE, 'floor', 'rps', (x) => x >= 0.75, '≥ 0.75');
  row('36: one order, CPU µs/req vs floor', ONE, 'floor', 'cpuUsPerRequest', (x) => x <= 1.9, '≤ 1.9×');
  row('35: filtered page of 50, CPU µs/req vs floor', FILTERED, 'floor', 'cpuUsPerRequest', (x) => x <= 1.6, '≤ 1.6×');
  if (fanout) {
    const cpu = fanout.floorMsPerEvent ? fanout.appMsPerEvent / fanout.floorMsPerEvent : 0;
    rows.push([
      '34: fan-out 5,000, server CPU ms/event vs floor',
      fanout.appMsPerEvent.toFixed(1),
      fanout.floorMsPerEvent.toFixed(1),
      `${f2(cpu)}×`,
      '1',
      '≤ 1.5×',
      meets(cpu <= 1.5),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  return [
    `Targets of issues 34, 35 and 36 (one run; ratios are medians of the rounds' ratios where "rounds" > 1; ` +
      `load average now ${load}${fanout ? `; fan-out at ${fanout.date}, load ${fanout.loadAverage.map((l) => l.toFixed(2)).join(' ')}, ${fanout.compiled ? 'compiled' : 'tsx'}` : '; fan-out not run (--with-fanout)'}):`,
    line(rows[0]!),
    widths.map((w) => '─'.repeat(w)).join('  '),
    ...rows.slice(1).map(line),
  ].join('\n');
}
