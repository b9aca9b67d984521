import { generateSecret, generateURI, verify } from 'otplib';
import QRCode from 'qrcode';
import type { Queryable } from '../../store/db.js';
import { claimTotpStep, saveTotp, totpOf } from '../../store/idpFactors.js';
import { DEMO_TOTP_SECRETS } from './demoTotp.js';

/** What authenticator apps show above the code. */
const ISSUER_LABEL = 'Orders API (development)';

/** A code of the previous, current or next 30-second step is accepted: a clock a step off still works. */
const TOLERANCE_SECONDS = 30;
const CODE = /^\d{6}$/;

/** The time step whose code `token` is (RFC 6238, ±1 step), or null when it is none of them. */
async function matchedStep(secret: string, token: string): Promise<number | null> {
  if (!CODE.test(token)) return null;
  const result = await verify({ secret, token, epochTolerance: TOLERANCE_SECONDS });
  return result.valid && 'timeStep' in result ? result.timeStep : null;
}

export async function seedDemoTotp(db: Queryable): Promise<void> {
  for (const [subject, secret] of Object.entries(DEMO_TOTP_SECRETS)) await saveTotp(db, subject, secret, false);
}

export async function hasTotp(db: Queryable, subject: string): Promise<boolean> {
  return (await totpOf(db, subject)) !== undefined;
}

/**
 * Checks a code (RFC 6238, ±1 step): `replayed` when its step, or a later one, was already used — no code works
 * twice, even when two requests race with it.
 */
export async function checkTotp(
  db: Queryable,
  subject: string,
  code: string,
): Promise<'accepted' | 'wrong' | 'replayed' | 'not_enrolled'> {
  const enrolled = await totpOf(db, subject);
  if (!enrolled) return 'not_enrolled';
  const step = await matchedStep(enrolled.secret, code.replace(/\s/g, ''));
  if (step === null) return 'wrong';
  if (enrolled.lastStep !== null && step <= enrolled.lastStep) return 'replayed';
  return (await claimTotpStep(db, subject, step)) ? 'accepted' : 'replayed';
}

/** A new secret for enrolment, with what an authenticator app scans: the otpauth URI as an SVG QR code. */
export async function newEnrolment(username: string): Promise<{ secret: string; uri: string; qrSvg: string }> {
  const secret = generateSecret();
  return { secret, ...(await enrolmentOf(username, secret)) };
}

export async function enrolmentOf(username: string, secret: string): Promise<{ uri: string; qrSvg: string }> {
  const uri = generateURI({ issuer: ISSUER_LABEL, label: username, secret });
  return { uri, qrSvg: await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 }) };
}

/**
 * Completes an enrolment once the person has shown a valid code for the new secret; `bind` runs just before it is
 * saved (it spends an enrolment code, and throws to refuse).
 */
export async function confirmEnrolment(
  db: Queryable,
  subject: string,
  secret: string,
  code: string,
  bind: () => Promise<void>,
): Promise<boolean> {
  const step = await matchedStep(secret, code.replace(/\s/g, ''));
  if (step === null) return false;
  await bind();
  await saveTotp(db, subject, secret, true);
  // The code that confirmed the secret is spent: it cannot sign in as well.
  await claimTotpStep(db, subject, step);
  return true;
}
