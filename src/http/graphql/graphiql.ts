import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type Request, type Response } from 'express';
import type { ApolloServerPlugin, BaseContext } from '@apollo/server';

/**
 * GraphiQL at /graphiql, for development: an IDE that needs no internet, since every file it loads comes from this
 * server (GraphiQL 3's UMD build and React 18's, from node_modules), where Apollo Sandbox loads from Apollo's CDN.
 */
export const GRAPHIQL_PATH = '/graphiql';

const require = createRequire(import.meta.url);
const packageDir = (name: string) => path.dirname(require.resolve(`${name}/package.json`));

/** The only files served under /graphiql/assets, by name: nothing from the request reaches the file system. */
function assetFiles(): Record<string, { file: string; type: string }> {
  const react = packageDir('react');
  const reactDom = packageDir('react-dom');
  const graphiql = packageDir('graphiql');
  return {
    'react.js': { file: path.join(react, 'umd/react.production.min.js'), type: 'js' },
    'react-dom.js': { file: path.join(reactDom, 'umd/react-dom.production.min.js'), type: 'js' },
    'graphiql.js': { file: path.join(graphiql, 'graphiql.min.js'), type: 'js' },
    'graphiql.css': { file: path.join(graphiql, 'graphiql.min.css'), type: 'css' },
  };
}

const DEFAULT_QUERY = `# GraphiQL, served by this API: it works offline.
#
# Signed in through /auth/login, requests carry your session cookie.
# Otherwise paste a token in Headers below: {"Authorization": "Bearer <token>"}
# (npm run --silent token -- --user alice)

{
  viewer { id subject roles scopes }
  recentOrders(first: 5) { id state totalCents customer { id name } }
  products { id name priceCents }
}
`;

/** The page's script, served as a file: the policy below allows scripts from this origin only, none inline. */
const BOOTSTRAP = `(function () {
  var fetcher = GraphiQL.createFetcher({
    url: new URL('/graphql', window.location.href).href,
    // The session cookie goes with every request (same origin); a pasted Authorization header wins over it.
    fetch: function (input, init) { return window.fetch(input, Object.assign({}, init, { credentials: 'include' })); },
  });
  var root = ReactDOM.createRoot(document.getElementById('graphiql'));
  root.render(React.createElement(GraphiQL, {
    fetcher: fetcher,
    defaultQuery: ${JSON.stringify(DEFAULT_QUERY)},
    defaultEditorToolsVisibility: 'headers',
    shouldPersistHeaders: false,
  }));
})();
`;

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>GraphiQL · Orders API</title>
    <link rel="stylesheet" href="${GRAPHIQL_PATH}/assets/graphiql.css" />
    <link rel="stylesheet" href="${GRAPHIQL_PATH}/assets/page.css" />
  </head>
  <body>
    <div id="graphiql">Loading GraphiQL…</div>
    <script src="${GRAPHIQL_PATH}/assets/react.js"></script>
    <script src="${GRAPHIQL_PATH}/assets/react-dom.js"></script>
    <script src="${GRAPHIQL_PATH}/assets/graphiql.js"></script>
    <script src="${GRAPHIQL_PATH}/assets/app.js"></script>
  </body>
</html>
`;

const PAGE_CSS = 'html, body, #graphiql { height: 100%; margin: 0; }\n';

/**
 * A policy of its own, stricter than the app-wide one: every script and stylesheet from this origin, nothing inline
 * and no eval (GraphiQL 3's UMD build needs neither; React and CodeMirror set styles through the CSSOM, which
 * style-src does not govern). GraphiQL's stylesheet embeds its fonts and icons as data: URIs.
 */
const POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function createGraphiqlRouter(): express.Router {
  const files = assetFiles();
  const router = express.Router();
  const common = (res: Response) => res.set({ 'Content-Security-Policy': POLICY });

  router.get('/', (_req: Request, res: Response) => {
    common(res).set('Cache-Control', 'no-store').type('html').send(PAGE);
  });
  router.get('/assets/app.js', (_req, res) => {
    common(res).set('Cache-Control', 'no-cache').type('js').send(BOOTSTRAP);
  });
  router.get('/assets/page.css', (_req, res) => {
    common(res).set('Cache-Control', 'no-cache').type('css').send(PAGE_CSS);
  });
  router.get('/assets/:name', (req, res, next) => {
    const asset = Object.hasOwn(files, req.params.name) ? files[req.params.name] : undefined;
    if (!asset) return next();
    // The installed version decides the content; revalidating costs a 304, never a stale IDE after an upgrade.
    common(res).set('Cache-Control', 'no-cache').type(asset.type);
    res.sendFile(asset.file, (err) => (err ? next(err) : undefined));
  });
  return router;
}

/**
 * Apollo's landing page has no option for a link of its own; its offline fallback ("… cannot be loaded; it appears
 * that you might be offline") is where a pointer to GraphiQL helps, so it is added there. If a future Apollo changes
 * that text, the link goes at the end of the page instead of silently disappearing.
 */
export function withGraphiqlLink<T extends BaseContext>(plugin: ApolloServerPlugin<T>): ApolloServerPlugin<T> {
  const link = `<p>GraphiQL needs no internet: <a href="${GRAPHIQL_PATH}">${GRAPHIQL_PATH}</a>.</p>`;
  return {
    ...plugin,
    async serverWillStart(service) {
      const listener = await plugin.serverWillStart?.(service);
      if (!listener?.renderLandingPage) return listener;
      const renderLandingPage = listener.renderLandingPage.bind(listener);
      return {
        ...listener,
        async renderLandingPage() {
          const page = await renderLandingPage();
          const original = page.html;
          const html = async () => {
            const text = typeof original === 'string' ? original : await original();
            const marker = /(it appears that you might be offline\.<\/p>)/;
            return marker.test(text)
              ? text.replace(marker, `$1\n  ${link}`)
              : text.replace('</body>', `${link}</body>`);
          };
          return { html };
        },
      };
    },
  };
}
