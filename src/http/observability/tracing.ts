import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { TracingConfig } from '../../config/index.js';
import { installTracing, NOOP_TRACING, tracing } from '../../tracing.js';
import type { ExportStats } from './tracingSdk.js';

let running: { users: number; stats: ExportStats } | undefined;

const version = (): string => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    // The production image's dist/ sits one level deeper than the sources.
    try {
      const pkg = JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as {
        version?: string;
      };
      return pkg.version ?? '0.0.0';
    } catch {
      return '0.0.0';
    }
  }
};

/**
 * Starts tracing for this process when the configuration has an OTLP endpoint; otherwise does nothing, and loads
 * nothing: the SDK module (and every OpenTelemetry package) is imported here, on demand, and only then. Tracing is the
 * process's, like OpenTelemetry's global API: servers sharing a process (tests) share it, and the last to stop flushes
 * what is queued and shuts it down. Returns how to stop.
 */
export async function startTracing(config: TracingConfig, logger: Logger): Promise<() => Promise<void>> {
  if (!config.enabled) return async () => undefined;
  if (!running) {
    const { startSdk } = await import('./tracingSdk.js');
    const started = startSdk(config, logger.child({ component: 'tracing' }), version());
    installTracing(started.tracing);
    running = { users: 0, stats: started.stats };
    logger.info(
      { collector: config.url, protocol: config.protocol, sampler: config.sampler, ratio: config.ratio },
      'tracing on',
    );
  }
  running.users += 1;
  let stopped = false;
  return async () => {
    if (stopped || !running) return;
    stopped = true;
    if (--running.users > 0) return;
    const sdk = tracing;
    running = undefined;
    installTracing(NOOP_TRACING);
    await sdk.shutdown();
  };
}

/** The span exporter's queue and counts, while tracing runs in this process. */
export const exportStats = (): ExportStats | undefined => running?.stats;
