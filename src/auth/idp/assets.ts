import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type Router } from 'express';
import { PASSKEY_SCRIPT } from './factorPages.js';

/**
 * SimpleWebAuthn's browser bundle, as the package ships it (it exports no path to it, so it is found beside its
 * entry point), and the script that runs it on the IdP's pages. Served from this origin: the pages' policy allows no
 * other script, and nothing is fetched from a CDN.
 */
function browserBundle(): string {
  const entry = createRequire(import.meta.url).resolve('@simplewebauthn/browser');
  return readFileSync(path.join(path.dirname(entry), '..', 'dist', 'bundle', 'index.umd.min.js'), 'utf8');
}

export function assetRoutes(): Router {
  const files = new Map([
    ['/simplewebauthn-browser.js', browserBundle()],
    ['/passkeys.js', PASSKEY_SCRIPT],
  ]);
  const router = express.Router();
  router.get('/assets/:file', (req, res, next) => {
    const body = files.get(`/${req.params.file}`);
    if (body === undefined) return next();
    res.set({ 'Cache-Control': 'public, max-age=3600', 'X-Content-Type-Options': 'nosniff' });
    res.type('text/javascript').send(body);
  });
  return router;
}
