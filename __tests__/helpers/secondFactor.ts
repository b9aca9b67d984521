import { generate } from 'otplib';
import { location, WebClient } from './webClient.js';

/** The TOTP code an authenticator app shows `steps` 30-second steps from now (the IdP accepts one either side). */
export function totpCode(secret: string, steps = 0): Promise<string> {
  return generate({ secret, epoch: Math.floor(Date.now() / 1000) + steps * 30 });
}

/** The action of the page's form whose path ends with `/step`. */
export function formAction(html: string, pageUrl: string, step: string): URL | undefined {
  const action = new RegExp(`<form method="post" action="([^"]+/${step})"`).exec(html)?.[1];
  return action ? new URL(action.replace(/&amp;/g, '&'), pageUrl) : undefined;
}

/**
 * Answers the IdP's second-factor page with this step's code, or the next step's when this one was already used (by
 * an earlier sign-in of the same user on the same server): a person would wait for the next code.
 */
export async function answerTotp(browser: WebClient, page: Response, secret: string): Promise<Response> {
  const action = formAction(await page.text(), page.url, 'totp');
  if (!action) throw new Error(`no TOTP form at ${page.url}`);
  let res = await browser.post(action, { code: await totpCode(secret) });
  if (res.status === 401 && /already used/.test(await res.clone().text())) {
    res = await browser.post(action, { code: await totpCode(secret, 1) });
  }
  return res;
}

/** Follows redirects (GET) until a page answers or the redirect leaves for `stopAt` (a path, such as /auth/callback). */
export async function follow(browser: WebClient, res: Response, stopAt: string): Promise<Response | URL> {
  for (let step = 0; step < 10; step++) {
    if (res.status < 300 || res.status >= 400) return res;
    const next = location(res);
    if (next.pathname === stopAt) return next;
    res = await browser.get(next);
  }
  throw new Error('too many redirects');
}

/**
 * A one-time enrolment code for `username`, issued as an administrator does (the directory client's credentials):
 * the channel through which a first second factor is bound.
 */
export async function enrolmentCode(base: string, username: string): Promise<string> {
  const res = await new WebClient().post(
    `${base}/idp/enrolment-codes`,
    { username },
    { authorization: `Basic ${Buffer.from('directory:directory-secret').toString('base64')}` },
  );
  const body = (await res.json()) as { code?: string };
  if (res.status !== 201 || !body.code) throw new Error(`no enrolment code for ${username}: ${res.status}`);
  return body.code;
}
