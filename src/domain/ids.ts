import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * Opaque, prefixed, time-sortable ids (`ord_…`): 48 bits of milliseconds then 80 random bits,
 * Crockford base32, so ids created later sort after earlier ones.
 */
export function newId(prefix: 'ord' | 'cus' | 'usr' | 'grp' | 'we' | 'msg', time: number = Date.now()): string {
  let ts = '';
  let t = Math.max(0, Math.floor(time));
  for (let i = 0; i < 10; i++) {
    ts = ALPHABET[t % 32] + ts;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(16);
  let rand = '';
  for (let i = 0; i < 16; i++) rand += ALPHABET[bytes[i]! % 32];
  return `${prefix}_${ts}${rand}`;
}

export const ID_PATTERN = /^(ord|cus)_[0-9a-hjkmnp-tv-z]{26}$/;

export const WEBHOOK_ENDPOINT_ID = /^we_[0-9a-hjkmnp-tv-z]{26}$/;
export const WEBHOOK_MESSAGE_ID = /^msg_[0-9a-hjkmnp-tv-z]{26}$/;
