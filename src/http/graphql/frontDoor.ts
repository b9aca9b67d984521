import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';

/** A step of the front door: Express's own middleware signature, so the same steps also serve a Router. */
export type Step = RequestHandler | ErrorRequestHandler;

/** The target path, without its query string. */
function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

/**
 * Runs `steps` in order for one request, as an Express router would, but without its layers: no path matching, no
 * layer objects, no per-layer promise bookkeeping. A step passes on with `next()`, refuses with `next(error)` (which
 * skips to the next error step, one of four parameters) or ends the answer; a promise it returns that rejects is an
 * error, as in Express 5. Whatever is left over when the steps run out goes to `done`.
 */
export function inOrder(steps: readonly Step[]) {
  return (req: Request, res: Response, done: NextFunction) => {
    let i = 0;
    const next = (error?: unknown): void => {
      while (i < steps.length) {
        const step = steps[i++]!;
        const handlesError = step.length === 4;
        if (error === undefined ? handlesError : !handlesError) continue;
        try {
          const result: unknown =
            error === undefined
              ? (step as RequestHandler)(req, res, next)
              : (step as ErrorRequestHandler)(error, req, res, next);
          if (result instanceof Promise)
            result.catch((reason: unknown) => next(reason ?? new Error('Rejected promise')));
        } catch (thrown) {
          next(thrown ?? new Error('Thrown undefined'));
        }
        return;
      }
      done(error);
    };
    next();
  };
}

/**
 * The one Express layer for exactly `path` (GraphQL over HTTP at /graphql), registered before every other: a request
 * for it runs `steps` in straight-line order and nothing else of the app (other paths, /graphql/stream among them,
 * pass on untouched). What the steps leave unanswered goes on as the rest of the app would have it: an error to the
 * app's error handlers, anything else to `unanswered` (the app's 404).
 */
export function frontDoor(
  path: string,
  steps: readonly Step[],
  unanswered: (req: Request, res: Response) => void,
): RequestHandler {
  const run = inOrder(steps);
  return (req, res, next) => {
    if (pathOf(req.url) !== path) return next();
    // As Express's mount at `path` would have it: the HTTP span is named by req.baseUrl (observability/httpSpans.ts).
    req.baseUrl = path;
    run(req, res, (error?: unknown) => {
      req.baseUrl = '';
      if (error === undefined) unanswered(req, res);
      else next(error);
    });
  };
}
