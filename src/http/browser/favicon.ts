import type { Request, Response } from 'express';

/** Browsers ask for it on every page; an empty answer they may cache beats a 404 in every log. */
export function favicon(_req: Request, res: Response): void {
  res.setHeader('Cache-Control', 'public, max-age=86400');
  res.status(204).end();
}
