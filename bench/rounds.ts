/**
 * `--rounds <n>`: each scenario's app, floor and target peers measured <n> times, in turn, and each ratio judged
 * on the median of its per-round values.
 *
 * On this shared 2-core machine one measured run of a server moves ±20 % with what else runs, and the floor's
 * own CPU per request has moved 627–1,092 µs between runs. A ratio of two runs taken a minute apart carries both
 * swings. Within a round the sides are measured back to back, and the order rotates from round to round so that
 * no side always runs first or last: a trend in the machine's load falls on every side alike, and the median of
 * the rounds' ratios drops the round that another process disturbed.
 */

/** One side's figures from one measured run. */
export interface RoundSide {
  readonly cpuUsPerRequest: number;
  readonly rps: number;
}

/** Every round's figures, by side: 'app', 'floor' or a peer's name. Round 1 is the scenario's main measurement. */
export type Rounds = readonly Readonly<Record<string, RoundSide>>[];

/** The true median: the middle value, or the mean of the two middle ones. */
export function median(xs: readonly number[]): number {
  if (!xs.length) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Measures rounds 2…<count> after the first (already measured, given as `first`). Round r runs the sides in their
 * order rotated by r, so that over the rounds each side takes each place.
 */
export async function measureRounds(
  first: Readonly<Record<string, RoundSide>>,
  sides: readonly (readonly [name: string, measure: () => Promise<RoundSide>])[],
  count: number,
): Promise<Rounds> {
  const rounds: Record<string, RoundSide>[] = [{ ...first }];
  for (let r = 1; r < count; r++) {
    const round: Record<string, RoundSide> = {};
    for (let i = 0; i < sides.length; i++) {
      const [name, measure] = sides[(i + r) % sides.length]!;
      round[name] = await measure();
    }
    rounds.push(round);
  }
  return rounds;
}

/** Each round's ratio of one side's figure to another's, and their median; null when a side is missing. */
export function ratioOf(
  rounds: Rounds,
  side: string,
  against: string,
  figure: keyof RoundSide,
): { readonly each: number[]; readonly median: number } | null {
  const each: number[] = [];
  for (const round of rounds) {
    const a = round[side];
    const b = round[against];
    if (!a || !b || !b[figure]) return null;
    each.push(a[figure] / b[figure]);
  }
  return each.length ? { each, median: median(each) } : null;
}

/** One line per scenario: each side's CPU µs/req and req/s per round, and the median ratios against the floor. */
export function describeRounds(scenario: string, rounds: Rounds): string {
  const names = Object.keys(rounds[0] ?? {});
  const list = (xs: number[], digits = 0) => xs.map((x) => x.toFixed(digits)).join(', ');
  const parts = names.map(
    (n) =>
      `${n} CPU µs/req ${list(rounds.map((r) => r[n]?.cpuUsPerRequest ?? Number.NaN))}, ` +
      `req/s ${list(rounds.map((r) => r[n]?.rps ?? Number.NaN))}`,
  );
  const ratios = names
    .filter((n) => n !== 'floor')
    .flatMap((n) => {
      const cpu = ratioOf(rounds, n, 'floor', 'cpuUsPerRequest');
      const rps = ratioOf(rounds, n, 'floor', 'rps');
      return cpu && rps
        ? [
            `${n}/floor CPU ${list(cpu.each, 2)} (median ${cpu.median.toFixed(2)}), ` +
              `req/s ${list(rps.each, 2)} (median ${rps.median.toFixed(2)})`,
          ]
        : [];
    });
  const againstApp = names
    .filter((n) => n !== 'floor' && n !== 'app')
    .flatMap((n) => {
      const cpu = ratioOf(rounds, 'app', n, 'cpuUsPerRequest');
      const rps = ratioOf(rounds, 'app', n, 'rps');
      return cpu && rps
        ? [`app/${n} CPU median ${cpu.median.toFixed(3)}, req/s ${list(rps.each, 2)} (median ${rps.median.toFixed(2)})`]
        : [];
    });
  return [`${scenario} over ${rounds.length} rounds: ${parts.join('; ')}`, ...ratios, ...againstApp].join('\n  ');
}
