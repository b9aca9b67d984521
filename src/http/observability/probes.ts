import type { Request, Response } from 'express';
import type { Redis } from 'ioredis';
import { redisReady } from '../../store/redis.js';

/**
 * The handlers of GET /healthz (the process answers) and GET /readyz (send it traffic: not draining, and the database
 * answers), for the load balancer and the orchestrator; never cached. Handlers rather than a router, so that the
 * app's other requests do not pass through one more.
 */
export function probes(deps: {
  db: { ping(): Promise<unknown> };
  redis?: Redis | undefined;
  /** True once shutdown has begun: readiness turns false first, so the balancer stops sending before sockets close. */
  draining: () => boolean;
}) {
  const { db, redis } = deps;
  return {
    healthz(_req: Request, res: Response) {
      res.setHeader('Cache-Control', 'no-store');
      res.json({ status: 'ok' });
    },
    async readyz(req: Request, res: Response) {
      res.setHeader('Cache-Control', 'no-store');
      if (deps.draining()) return res.status(503).json({ status: 'draining' });
      // Redis down is a degraded mode, not unreadiness: state stays in process and the outbox is polled.
      const cache = redis ? { redis: redisReady(redis) ? 'ready' : 'unavailable' } : {};
      try {
        await db.ping();
        res.json({ status: 'ready', ...cache });
      } catch (error) {
        req.log.warn({ err: error }, 'readiness check failed');
        res.status(503).json({ status: 'database unreachable', ...cache });
      }
    },
  };
}
