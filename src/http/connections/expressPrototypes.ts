import { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';

/**
 * The HTTP server's request and response classes, whose instances are born with the Express app's prototypes.
 *
 * Express's `app.handle` gives every request and response its own prototypes (`Object.setPrototypeOf(req,
 * app.request)`). Changing an object's prototype after it is made costs V8 far more than the call suggests: the
 * objects take a hidden class of their own and allocate more, and much of what a request allocates then survives the
 * young-generation collections and is copied into the old generation, to be freed only by a full collection. A bare
 * `app.use((req, res) => res.end())` served 20–22k requests in 5 s that way against 69–97k with the objects born
 * with the app's prototypes, which V8 leaves as they are when asked to set the prototype they already have
 * (bench/README.md has the figures).
 *
 * Until `adopt` is called (the app is built after the socket opens), the prototypes are Node's own.
 */
export function expressPrototypes() {
  class Request extends IncomingMessage {}
  class Response<R extends IncomingMessage = IncomingMessage> extends ServerResponse<R> {}
  return {
    IncomingMessage: Request,
    ServerResponse: Response,
    /** From now on, requests and responses are born with `app`'s prototypes. */
    adopt(app: Express): void {
      for (const [own, theirs] of [
        [Request.prototype, app.request],
        [Response.prototype, app.response],
      ] as const) {
        // app.request is `Object.create(express's request, { app })`: this class's prototype takes its place.
        Object.setPrototypeOf(own, Object.getPrototypeOf(theirs) as object);
        Object.defineProperty(own, 'app', { configurable: true, enumerable: true, writable: true, value: app });
      }
      app.request = Request.prototype as unknown as Express['request'];
      app.response = Response.prototype as unknown as Express['response'];
    },
  };
}
