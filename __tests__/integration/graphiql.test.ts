import { afterAll, beforeAll, describe, test } from '@jest/globals';
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { artifactDir } from '../helpers/testRun.js';

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1']);

/** A browser context with the network closed: requests off this machine are aborted and listed in `outside`. */
async function offlineContext(browser: Browser) {
  const context = await browser.newContext();
  const outside: string[] = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (LOCAL_HOSTS.has(url.hostname)) return route.continue();
    outside.push(url.href);
    return route.abort('internetdisconnected');
  });
  return { context, outside };
}

interface OrdersResult {
  data: {
    viewer: { id: string; subject: string };
    recentOrders: { id: string; customer: { name: string } }[];
    products: unknown[];
  };
}

describe('GraphiQL at /graphiql', () => {
  let server: TestServer;
  let prod: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    prod = await startTestServer(
      { NODE_ENV: 'production', OIDC_ISSUER: server.running.app.issuer },
      { sameDatabaseAs: server },
    );
  });
  afterAll(async () => {
    await prod?.close();
    await server?.close();
  });

  test('serves the page and its assets from this server, under a policy of their own', async () => {
    const page = await server.http.get('/graphiql').set('accept', 'text/html');
    assert.equal(page.status, 200);
    assert.equal(page.get('content-type'), 'text/html; charset=utf-8');
    const csp = String(page.get('content-security-policy'));
    assert.match(csp, /script-src 'self';/);
    assert.doesNotMatch(csp, /unsafe-eval/);
    const sources = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.deepEqual(sources, [
      '/graphiql/assets/graphiql.css',
      '/graphiql/assets/page.css',
      '/graphiql/assets/react.js',
      '/graphiql/assets/react-dom.js',
      '/graphiql/assets/graphiql.js',
      '/graphiql/assets/app.js',
    ]);
    for (const source of sources) {
      const asset = await server.http.get(source);
      assert.equal(asset.status, 200, source);
      assert.match(String(asset.get('content-type')), source.endsWith('.css') ? /^text\/css/ : /javascript/, source);
      assert.equal(asset.get('content-security-policy'), csp);
    }
    const unknown = await server.http.get('/graphiql/assets/..%2Fpackage.json');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.get('content-type'), 'application/problem+json; charset=utf-8');
  });

  test('the /graphql landing page keeps Sandbox and links to GraphiQL in its offline fallback', async () => {
    const res = await server.http.get('/graphql').set('accept', 'text/html');
    assert.equal(res.status, 200);
    assert.match(res.text, /embeddable-sandbox\.cdn\.apollographql\.com/);
    assert.match(
      res.text,
      /might be offline\.<\/p>\s*<p>GraphiQL needs no internet: <a href="\/graphiql">\/graphiql<\/a>\.<\/p>/,
    );
  });

  test('production serves neither GraphiQL nor its assets: 404 problem+json, like Sandbox', async () => {
    for (const url of ['/graphiql', '/graphiql/assets/graphiql.js']) {
      const res = await prod.http.get(url).set('accept', 'text/html');
      assert.equal(res.status, 404, url);
      assert.equal(res.get('content-type'), 'application/problem+json; charset=utf-8');
      assert.equal((res.body as { code: string }).code, 'ROUTE_NOT_FOUND');
    }
  });

  describe('in headless Chromium, with the network closed', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(() => browser?.close());

    test('alice signs in, GraphiQL loads the schema by introspection and runs a query returning her orders', async () => {
      const screenshots = artifactDir('graphiql');
      // The browser uses the public URL: the session cookie belongs to its host.
      const base = server.running.publicUrl;
      const { context, outside } = await offlineContext(browser);
      // Every Content-Security-Policy violation on any page, kept where the test can read it (no DOM types here).
      await context.addInitScript(`
        window.cspViolations = [];
        document.addEventListener('securitypolicyviolation', (e) =>
          window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));
      `);
      const page = await context.newPage();

      // Sandbox needs Apollo's CDN: offline, its fallback shows, with the link to GraphiQL.
      await page.goto(`${base}/graphql`);
      await page.getByText('it appears that you might be offline').waitFor();
      assert.ok(outside.some((url) => url.startsWith('https://embeddable-sandbox.cdn.apollographql.com/')));
      assert.equal(await page.getByRole('link', { name: '/graphiql' }).getAttribute('href'), '/graphiql');
      await page.screenshot({ path: path.join(screenshots, 'sandbox-offline.png') });
      outside.length = 0;

      await page.goto(`${base}/auth/login?returnTo=/graphiql`);
      await page.getByLabel('Username').fill('alice');
      await page.getByLabel('Password').fill('alice');
      const introspection = page.waitForResponse(
        (r) => r.url() === `${base}/graphql` && String(r.request().postData()).includes('__schema'),
      );
      await Promise.all([page.waitForURL(`${base}/graphiql`), page.getByRole('button', { name: 'Sign in' }).click()]);
      const schema = await introspection;
      assert.equal(schema.status(), 200);
      const types = ((await schema.json()) as { data: { __schema: { types: { name: string }[] } } }).data.__schema
        .types;
      assert.ok(types.some((t) => t.name === 'Order'));

      // The documentation explorer is built from that introspection.
      await page.getByRole('button', { name: /Documentation Explorer/ }).click();
      await page.getByText('query:').waitFor();
      await page.getByRole('link', { name: 'Query' }).first().waitFor();

      const run = page.waitForResponse(
        (r) => r.url() === `${base}/graphql` && String(r.request().postData()).includes('recentOrders'),
      );
      await page.getByRole('button', { name: /Execute query/ }).click();
      const response = await run;
      assert.equal(response.status(), 200);
      const result = (await response.json()) as OrdersResult;
      assert.equal(result.data.viewer.subject, 'alice');
      assert.ok(result.data.recentOrders.length > 0);
      assert.ok(result.data.recentOrders.every((o) => o.customer.name === 'Alice Adams'));
      // What the response pane shows is that result.
      const pane = page.locator('.graphiql-response');
      await pane.getByText(`"${result.data.recentOrders[0]!.id}"`).waitFor();
      await page.screenshot({ path: path.join(screenshots, 'graphiql-orders.png'), fullPage: true });

      assert.deepEqual(outside, [], 'GraphiQL reached outside this server');
      assert.deepEqual(await page.evaluate<string[]>('window.cspViolations'), []);
      // The listener does hear violations: an inline style element is one.
      await page.evaluate(
        `document.head.append(Object.assign(document.createElement('style'), { textContent: 'b{}' }))`,
      );
      await page.waitForFunction('window.cspViolations.length > 0');
      assert.match((await page.evaluate<string[]>('window.cspViolations'))[0]!, /^style-src/);
      await context.close();
    });

    test('without a session, a token pasted into the headers editor authenticates the query', async () => {
      const base = server.running.publicUrl;
      const token = await server.token('bob');
      const { context, outside } = await offlineContext(browser);
      const page = await context.newPage();
      await page.goto(`${base}/graphiql`);
      await page.getByRole('button', { name: /Execute query/ }).waitFor();
      // Anonymous first: the query is refused for want of credentials.
      const anonymous = page.waitForResponse((r) => String(r.request().postData()).includes('recentOrders'));
      await page.getByRole('button', { name: /Execute query/ }).click();
      const refused = (await (await anonymous).json()) as { errors: { extensions: { code: string } }[] };
      assert.equal(refused.errors[0]!.extensions.code, 'UNAUTHENTICATED');

      await page.getByRole('button', { name: 'Headers' }).click();
      await page.locator('.graphiql-editor-tool .CodeMirror').last().click();
      await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${token}` }));
      const run = page.waitForResponse((r) => String(r.request().postData()).includes('recentOrders'));
      await page.getByRole('button', { name: /Execute query/ }).click();
      const response = await run;
      assert.equal(response.request().headers().authorization, `Bearer ${token}`);
      const result = (await response.json()) as OrdersResult;
      assert.equal(result.data.viewer.subject, 'bob');
      assert.ok(result.data.recentOrders.every((o) => o.customer.name === result.data.recentOrders[0]!.customer.name));
      assert.notEqual(result.data.recentOrders[0]?.customer.name, 'Alice Adams');
      assert.deepEqual(outside, []);
      await context.close();
    });
  });
});
