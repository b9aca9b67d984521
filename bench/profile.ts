import { readFile } from 'node:fs/promises';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples?: number[];
  timeDeltas?: number[];
}

export interface Share {
  readonly name: string;
  /** Share of the busy (non-idle) samples, in percent. */
  readonly percent: number;
}

export interface ProfileSummary {
  readonly busyMs: number;
  /** Self time by the npm package or source file responsible for it (see summarizeProfile). */
  readonly byPlace: readonly Share[];
  /** Self time of single functions. */
  readonly byFunction: readonly Share[];
}

/** Where a frame's code lives: `graphql`, `@apollo/server`, `src/store/rows.ts`, `node:internal`, `(gc)`. */
function place(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return pkg[1]!;
  // The harness is bundled (bench/results/children/), profiler.ts with it: its frames are the profiler's own.
  if (/\/children\/[^/]+\.mjs$/.test(url) && (functionName === 'start' || functionName === 'stop')) {
    return 'bench/profiler.ts';
  }
  const own = /\/((?:src|bench)\/.+)$/.exec(url);
  if (own) return own[1]!;
  if (url.startsWith('node:')) return 'node:' + (url.startsWith('node:internal') ? 'internal' : url.slice(5));
  return url;
}

function label(frame: CallFrame): string {
  const where = place(frame);
  if (!frame.url) return where === '(native)' ? `${frame.functionName || '(anonymous)'} (native)` : where;
  return `${frame.functionName || '(anonymous)'} ${where}:${frame.lineNumber + 1}`;
}

const isCode = (where: string) => !where.startsWith('(') && !where.startsWith('node:');

/**
 * Self time per function, and per place where node internals and native code are charged to the
 * nearest package or source file that called them: socket writes under pg count as pg, RSA
 * verification under jose as jose. Samples taken while the profiler itself was starting are left out.
 */
export async function summarizeProfile(path: string, top = 12): Promise<ProfileSummary> {
  const profile = JSON.parse(await readFile(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);

  const charged = new Map<number, string | null>();
  /** The place a node's self time is charged to; null for the profiler's own frames. */
  function chargeOf(id: number): string | null {
    if (charged.has(id)) return charged.get(id)!;
    const frame = byId.get(id)!.callFrame;
    const where = place(frame);
    const parent = parentOf.get(id);
    const above = parent === undefined ? undefined : chargeOf(parent);
    // Code keeps its own name; internals take their caller's, unless that is only the root or GC.
    const result =
      above === null || where === 'bench/profiler.ts'
        ? null
        : isCode(where) || above === undefined || !isCode(above)
          ? where
          : above;
    charged.set(id, result);
    return result;
  }

  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + Math.max(0, deltas[i] ?? 0));
  }
  const perPlace = new Map<string, number>();
  const perFunction = new Map<string, number>();
  let busy = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    const charge = chargeOf(id);
    if (frame.functionName === '(idle)' || charge === null) continue;
    busy += us;
    perPlace.set(charge, (perPlace.get(charge) ?? 0) + us);
    perFunction.set(label(frame), (perFunction.get(label(frame)) ?? 0) + us);
  }
  const shares = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, percent: busy ? (100 * us) / busy : 0 }));
  return { busyMs: busy / 1000, byPlace: shares(perPlace), byFunction: shares(perFunction) };
}

/**
 * `usPerRequest`: the profiled run's CPU per request; each share is then also shown as µs per request (busy samples
 * are wall-clock time on the thread, so shares of system calls grow when the machine is busy).
 */
export function renderProfile(scenario: string, path: string, s: ProfileSummary, usPerRequest?: number): string {
  const us = (percent: number) =>
    usPerRequest === undefined
      ? ''
      : `${Math.round((percent / 100) * usPerRequest)
          .toString()
          .padStart(5)} µs/req  `;
  const rows = (list: readonly Share[]) =>
    list.map((x) => `    ${x.percent.toFixed(1).padStart(5)} %  ${us(x.percent)}${x.name}`);
  return [
    `Profile of the app during ${scenario} (${path}, ${Math.round(s.busyMs)} ms busy; self time` +
      `${usPerRequest === undefined ? '' : `; ${Math.round(usPerRequest)} µs CPU per request in the profiled run`}):`,
    '  by package or source file (node internals and native code charged to their caller):',
    ...rows(s.byPlace),
    '  by function:',
    ...rows(s.byFunction),
  ].join('\n');
}
