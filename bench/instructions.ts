/**
 * `npm run bench -- --instructions [--compare <dir>]`: the app's instructions per request, counted by valgrind's
 * callgrind, for an A/B of a hot-path change that the machine's noise would hide.
 *
 * CPU time per request moves by ±10 % from run to run on this shared machine, more than most single cuts save. The
 * number of instructions a process executes for the same requests does not depend on what else the machine is doing:
 * each replica runs under `valgrind --tool=callgrind` with counting off, is warmed up (V8 compiles the hot path), and
 * then counts the instructions of a fixed number of requests sent by a fixed number of connections. User-space only:
 * the kernel's share of socket writes is not in it, so a change in the number or size of system calls shows in CPU
 * time (the main bench), not here.
 */
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startChild, type ServerChild } from './children.js';
import { ignoreBudgetCountdown, runLoad, type LoadSpec } from './load.js';
import type { Scenario } from './scenarios.js';

const run = promisify(execFile);

export interface InstructionOptions {
  /** Requests before counting starts, so that V8 has compiled and optimised the hot path. */
  readonly warmup: number;
  /** Requests counted. */
  readonly requests: number;
  readonly connections: number;
  readonly outDir: string;
}

export interface InstructionSide {
  readonly name: string;
  readonly env: Record<string, string | undefined>;
}

export interface InstructionResult {
  readonly scenario: string;
  readonly side: string;
  readonly requests: number;
  readonly instructionsPerRequest: number;
}

/** Whether valgrind and callgrind_control are on this machine (Debian's `valgrind` package). */
export async function haveCallgrind(): Promise<boolean> {
  try {
    await run('valgrind', ['--version'], { timeout: 10_000 });
    await run('callgrind_control', ['-h'], { timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

const control = (child: ServerChild, ...flags: string[]) =>
  run('callgrind_control', [...flags, String(child.pid)], { timeout: 120_000 });

/** The instruction total of the newest dump callgrind wrote for this child. */
async function lastDumpTotal(dir: string, prefix: string): Promise<number> {
  const dumps = (await readdir(dir))
    .filter((f) => f.startsWith(prefix) && /\.out\.\d+$/.test(f))
    .sort((a, b) => Number(/\.(\d+)$/.exec(a)![1]) - Number(/\.(\d+)$/.exec(b)![1]));
  const newest = dumps.at(-1);
  if (!newest) throw new Error(`callgrind wrote no dump under ${dir} for ${prefix}`);
  const text = await readFile(join(dir, newest), 'utf8');
  const totals = /^totals: (\d+)/m.exec(text) ?? /^summary: (\d+)/m.exec(text);
  if (!totals) throw new Error(`no totals in ${newest}`);
  return Number(totals[1]);
}

/**
 * Starts each side as a replica under callgrind, then, for every scenario, warms it up and counts the instructions
 * of `requests` requests. Every response must be the expected one (the same check as the main bench), else the run
 * fails: instructions spent on an error page say nothing about the path measured.
 */
export async function countInstructions(
  sides: readonly InstructionSide[],
  chosen: readonly Scenario[],
  expected: (scenario: Scenario, url: string) => Promise<string>,
  options: InstructionOptions,
  log: (message: string) => void,
): Promise<InstructionResult[]> {
  await rm(options.outDir, { recursive: true, force: true });
  await mkdir(options.outDir, { recursive: true });
  const results: InstructionResult[] = [];
  for (const side of sides) {
    const prefix = `${side.name}.`;
    const child = await startChild(`${side.name} (callgrind)`, './appServer.ts', side.env, [], {
      command: 'valgrind',
      args: [
        '--tool=callgrind',
        // V8 writes and rewrites machine code: valgrind must notice, or it runs stale translations.
        '--smc-check=all-non-file',
        '--instr-atstart=no',
        `--callgrind-out-file=${join(options.outDir, `${prefix}%p.out`)}`,
        '--quiet',
      ],
    });
    log(`${side.name} listening under callgrind at ${child.ready.url} (pid ${child.pid})`);
    try {
      for (const scenario of chosen) {
        const body = await expected(scenario, child.ready.url);
        const spec: LoadSpec = {
          ...scenario.request(child.ready.url),
          expectBody: body,
          normalize: ignoreBudgetCountdown,
        };
        const load = (amount: number) =>
          runLoad(spec, { connections: options.connections, seconds: 600, amount }).then((stats) => {
            const bad = stats.non2xx + stats.errors + stats.mismatches;
            if (bad || stats.responses !== amount)
              throw new Error(`${scenario.name} on ${side.name}: ${bad} bad of ${stats.responses} responses`);
          });
        await load(options.warmup);
        await control(child, '--zero');
        await control(child, '--instr=on');
        await load(options.requests);
        await control(child, '--instr=off');
        await control(child, '--dump');
        const total = await lastDumpTotal(options.outDir, prefix);
        const perRequest = total / options.requests;
        results.push({
          scenario: scenario.name,
          side: side.name,
          requests: options.requests,
          instructionsPerRequest: perRequest,
        });
        log(`${scenario.name} on ${side.name}: ${Math.round(perRequest).toLocaleString('en-US')} instructions/request`);
      }
    } finally {
      await child.stop();
    }
  }
  return results;
}

/** One line per scenario: each side's instructions per request, and each side against the first. */
export function renderInstructions(results: readonly InstructionResult[], options: InstructionOptions): string {
  const scenarios = [...new Set(results.map((r) => r.scenario))];
  const lines = [
    `Instructions per request (callgrind, user space only; ${options.warmup} requests of warm-up, ` +
      `${options.requests} counted, ${options.connections} connection(s)):`,
  ];
  for (const scenario of scenarios) {
    const rows = results.filter((r) => r.scenario === scenario);
    const first = rows[0]!.instructionsPerRequest;
    lines.push(
      `  ${scenario.padEnd(18)} ` +
        rows
          .map(
            (r, i) =>
              `${r.side} ${Math.round(r.instructionsPerRequest).toLocaleString('en-US')}` +
              (i ? ` (${(r.instructionsPerRequest / first).toFixed(3)}× ${rows[0]!.side})` : ''),
          )
          .join(', '),
    );
  }
  return lines.join('\n');
}
