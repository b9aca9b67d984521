import { ConfigError, loadConfig, type Config } from './config/index.js';
import { createLogger } from './logger.js';
import { startServer } from './server.js';

let config: Config;
try {
  config = loadConfig();
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(1);
  }
  throw error;
}

// Readable lines on a developer's terminal; JSON for anything that collects logs.
const logger = createLogger(config.logLevel, {
  pretty: process.stdout.isTTY === true && !config.isProduction,
  traced: config.tracing.enabled,
});
process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection'));

try {
  const running = await startServer(config, logger);
  logger.info(
    { url: running.publicUrl, graphql: `${running.publicUrl}/graphql`, metrics: running.metricsUrl ?? 'off' },
    'orders-api listening',
  );
  let stopping = false;
  const shutdown = (signal: string) => {
    // The listener stays installed: a second signal must not fall through to the default (kill) handler.
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'draining');
    running.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
} catch (error) {
  logger.fatal({ err: error }, 'start-up failed');
  process.exit(1);
}
