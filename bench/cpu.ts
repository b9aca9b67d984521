import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';

/**
 * Machine-wide CPU readings around a measured run. On a small shared machine the servers compete
 * with PostgreSQL, the load generator and whatever else runs; these readings say how much of the
 * machine each had, so a noisy number can be told from a slow server.
 */
export interface MachineCpu {
  /** Non-idle CPU time summed over all cores (ms). */
  readonly busyMs: number;
  /** CPU time of every process named `postgres` on this machine (ms), or null where /proc is unreadable. */
  readonly postgresMs: number | null;
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

async function postgresMs(): Promise<number | null> {
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  } catch {
    return null;
  }
  let ticks = 0;
  await Promise.all(
    pids.map(async (pid) => {
      try {
        const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
        const close = stat.lastIndexOf(')');
        if (stat.slice(stat.indexOf('(') + 1, close) !== 'postgres') return;
        // Fields after "(comm)": state is field 3, utime 14 and stime 15 (1-based, see proc(5)).
        const fields = stat.slice(close + 2).split(' ');
        ticks += Number(fields[11]) + Number(fields[12]);
      } catch {
        // The process ended between readdir and readFile.
      }
    }),
  );
  return (ticks * 1000) / TICKS_PER_SECOND;
}

export async function readMachineCpu(): Promise<MachineCpu> {
  const busyMs = os.cpus().reduce((sum, c) => sum + c.times.user + c.times.nice + c.times.sys + c.times.irq, 0);
  return { busyMs, postgresMs: await postgresMs() };
}
