/**
 * Issue 27's table, from one `npm run bench -- --peers --with-fanout` run, and the regression check against
 * bench/results/baseline.json (`--check`, `--write-baseline`).
 *
 * The check compares the list of 100's **CPU efficiency**, floor CPU µs/req ÷ app CPU µs/req (1.0 = the app costs
 * what the floor costs), rather than the req/s ratio: on this shared 2-core machine another process taking a core
 * moves req/s by far more than it moves CPU time per request, and both servers are measured in the same run.
 */
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import type { ScenarioResult } from './report.js';

export const LIST = 'recentOrders-100';
export const ONE = 'order-by-id';
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

export function baselineOf(results: readonly ScenarioResult[], commit?: string): Baseline {
  const r = results.find((x) => x.name === LIST);
  if (!r) throw new Error(`--write-baseline needs the ${LIST} scenario`);
  return {
    date: new Date().toISOString(),
    ...(commit ? { commit } : {}),
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    scenario: LIST,
    cpuEfficiency: r.app.cpuUsPerRequest ? r.floor.cpuUsPerRequest / r.app.cpuUsPerRequest : 0,
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
  const now = r.app.cpuUsPerRequest ? r.floor.cpuUsPerRequest / r.app.cpuUsPerRequest : 0;
  const least = baseline.cpuEfficiency * (1 - CHECK_TOLERANCE);
  return now < least
    ? [
        `${LIST}: CPU efficiency against the floor is ${now.toFixed(3)} (app ${Math.round(r.app.cpuUsPerRequest)} µs/req, ` +
          `floor ${Math.round(r.floor.cpuUsPerRequest)}), more than ${CHECK_TOLERANCE * 100} % below the baseline's ` +
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
const meets = (ok: boolean | null) => (ok === null ? '–' : ok ? 'yes' : 'no');

export function renderTargets(results: readonly ScenarioResult[], fanout: FanoutFigures | null): string {
  const list = results.find((r) => r.name === LIST);
  const one = results.find((r) => r.name === ONE);
  const merc = list?.peers?.find((p) => p.name.startsWith('mercurius'));
  const rows: string[][] = [['figure', 'ours', 'against', 'ratio', 'target', 'met']];
  if (list && merc) {
    const ratio = merc.result.stats.rps ? list.app.stats.rps / merc.result.stats.rps : 0;
    rows.push([
      'list of 100, req/s vs Mercurius + jit',
      f0(list.app.stats.rps),
      f0(merc.result.stats.rps),
      f2(ratio),
      '≥ 0.90',
      meets(ratio >= 0.9),
    ]);
  }
  if (list) {
    rows.push([
      'list of 100, CPU µs/req vs floor',
      f0(list.app.cpuUsPerRequest),
      f0(list.floor.cpuUsPerRequest),
      `${f2(list.cpuPerRequestRatio)}×`,
      '≤ 1.35×',
      meets(list.cpuPerRequestRatio <= 1.35),
    ]);
  }
  if (one) {
    rows.push([
      'one order, req/s vs floor',
      f0(one.app.stats.rps),
      f0(one.floor.stats.rps),
      f2(one.throughputRatio),
      '≥ 0.75',
      meets(one.throughputRatio >= 0.75),
    ]);
  }
  if (fanout) {
    const cpu = fanout.floorMsPerEvent ? fanout.appMsPerEvent / fanout.floorMsPerEvent : 0;
    const p99 = fanout.floorLastP99Ms ? fanout.appLastP99Ms / fanout.floorLastP99Ms : 0;
    rows.push(
      [
        'fan-out 5,000: server CPU ms/event vs floor',
        fanout.appMsPerEvent.toFixed(1),
        fanout.floorMsPerEvent.toFixed(1),
        `${f2(cpu)}×`,
        '≤ 1.25×',
        meets(cpu <= 1.25),
      ],
      [
        'fan-out 5,000: last subscriber p99 ms vs floor',
        fanout.appLastP99Ms.toFixed(1),
        fanout.floorLastP99Ms.toFixed(1),
        `${f2(p99)}×`,
        '≤ 1.3×',
        meets(p99 <= 1.3),
      ],
    );
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  return [
    `Issue 27 targets (one run; load average now ${load}${fanout ? `; fan-out at ${fanout.date}, load ${fanout.loadAverage.map((l) => l.toFixed(2)).join(' ')}, ${fanout.compiled ? 'compiled' : 'tsx'}` : '; fan-out not run (--with-fanout)'}):`,
    line(rows[0]!),
    widths.map((w) => '─'.repeat(w)).join('  '),
    ...rows.slice(1).map(line),
  ].join('\n');
}
