import express, { type Request, type Response } from 'express';
import type { InvalidField } from '../../domain/errors.js';
import { escapeHtml } from '../../html.js';
import { PROBLEM_TYPES, problemBody, type ApiErrorCode } from './catalogue.js';

/** Writes an RFC 9457 problem details response. */
export function sendProblem(
  req: Request,
  res: Response,
  code: ApiErrorCode,
  detail: string,
  extra: {
    invalid?: readonly InvalidField[];
    headers?: Record<string, string>;
    /** Extension members of the problem type (RFC 9457 §3.2). */
    members?: Readonly<Record<string, unknown>>;
  } = {},
): void {
  for (const [name, value] of Object.entries(extra.headers ?? {})) res.setHeader(name, value);
  res.setHeader('Cache-Control', 'no-store');
  res
    .status(PROBLEM_TYPES[code].status)
    .type('application/problem+json')
    .send(JSON.stringify(problemBody(code, detail, req.originalUrl, extra.invalid, extra.members)));
}

/** The human page behind each problem type URI. */
export function problemPage(slug: string): string | null {
  const entry = Object.entries(PROBLEM_TYPES).find(([, t]) => t.slug === slug);
  if (!entry) return null;
  const [code, type] = entry;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(type.title)} — Orders API</title></head>
<body><main><h1>${escapeHtml(type.title)}</h1>
<p>HTTP status <strong>${type.status}</strong>, code <code>${escapeHtml(code)}</code> (also GraphQL <code>extensions.code</code>).</p>
<p>${escapeHtml(type.description)}</p></main></body></html>`;
}

/** GET /problems/<slug>: the page each problem type URI names; a day in any cache. */
export function problemPages(): express.Router {
  const router = express.Router();
  router.get('/:slug', (req, res, next) => {
    const page = problemPage(req.params.slug);
    if (!page) return next();
    res.set('Cache-Control', 'public, max-age=86400').type('html').send(page);
  });
  return router;
}
