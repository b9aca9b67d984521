import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

/**
 * A CPU profiler the bench switches on for exactly one measured run, through the inspector
 * (rather than `--cpu-prof`, which would profile start-up, sign-ins and every scenario at once).
 */
export function createProfiler(dir: string) {
  const session = new Session();
  session.connect();
  let count = 0;
  return {
    async start(): Promise<null> {
      await session.post('Profiler.enable');
      // 250 µs: a request takes a few hundred µs of CPU, so the default 1 ms would see little of it.
      await session.post('Profiler.setSamplingInterval', { interval: 250 });
      await session.post('Profiler.start');
      return null;
    },
    /** Stops and writes the profile; returns its path (open it in Chrome DevTools or speedscope). */
    async stop(): Promise<string> {
      const { profile } = await session.post('Profiler.stop');
      await mkdir(dir, { recursive: true });
      const path = join(dir, `app-${++count}.cpuprofile`);
      await writeFile(path, JSON.stringify(profile));
      return path;
    },
  };
}
