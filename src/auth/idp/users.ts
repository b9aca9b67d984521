import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';
import type { Algorithm } from '@node-rs/argon2';
import type { Database, Queryable } from '../../store/db.js';
import { idpUserBy, idpUsernames, insertIdpUser, type IdpUserRecord } from '../../store/idp.js';

export interface IdpUser {
  readonly username: string;
  /** Stable OIDC subject; other code links customers to it, so it never changes. */
  readonly subject: string;
  readonly name: string;
  readonly email: string;
  readonly roles: readonly string[];
}

// The package declares Algorithm as an ambient const enum, which isolatedModules cannot inline.
const ARGON2ID = 2 as Algorithm.Argon2id;

/** Development accounts; each password equals the username. */
const DEMO_USERS: readonly IdpUser[] = [
  { username: 'alice', subject: 'alice', name: 'Alice Adams', email: 'alice@example.com', roles: [] },
  { username: 'bob', subject: 'bob', name: 'Bob Brown', email: 'bob@example.com', roles: [] },
  { username: 'carol', subject: 'carol', name: 'Carol Clark', email: 'carol@example.com', roles: ['staff'] },
];

export interface Argon2Params {
  readonly memoryCost: number;
  readonly timeCost: number;
  readonly parallelism: number;
}

/** OWASP's Argon2id baseline (19 MiB, 2 passes, 1 lane): every environment but the test suite. */
export const ARGON2_PARAMS: Argon2Params = Object.freeze({ memoryCost: 19456, timeCost: 2, parallelism: 1 });
// Tests hash and verify demo passwords hundreds of times; these hashes guard nothing.
const TEST_ARGON2_PARAMS: Argon2Params = Object.freeze({ memoryCost: 1024, timeCost: 1, parallelism: 1 });

export function argon2Params(nodeEnv: 'development' | 'test' | 'production'): Argon2Params {
  return nodeEnv === 'test' ? TEST_ARGON2_PARAMS : ARGON2_PARAMS;
}

export function hashPassword(password: string, params: Argon2Params = ARGON2_PARAMS): Promise<string> {
  return hash(password, { algorithm: ARGON2ID, ...params });
}

/** Inserts the demo accounts that are missing; existing rows (and changed passwords) are left alone. */
export async function seedDemoUsers(db: Database, params: Argon2Params = ARGON2_PARAMS): Promise<void> {
  const present = await idpUsernames(db);
  for (const user of DEMO_USERS) {
    if (present.has(user.username)) continue;
    await insertIdpUser(db, {
      ...user,
      roles: [...user.roles],
      passwordHash: await hashPassword(user.username, params),
    });
  }
}

export async function findUserBySubject(db: Queryable, subject: string): Promise<IdpUser | undefined> {
  const record = await idpUserBy(db, 'subject', subject);
  return record ? toUser(record) : undefined;
}

/** Names are compared as sign-in compares them: trimmed and lower-cased. */
export async function findUserByUsername(db: Queryable, username: string): Promise<IdpUser | undefined> {
  const record = await idpUserBy(db, 'username', username.trim().toLowerCase());
  return record ? toUser(record) : undefined;
}

let decoyHash: Promise<string> | undefined;

/** Returns the user only when the password matches; unknown users cost the same time as wrong passwords. */
export async function verifyCredentials(
  db: Queryable,
  username: string,
  password: string,
): Promise<IdpUser | undefined> {
  const record = await idpUserBy(db, 'username', username.trim().toLowerCase());
  if (!record) {
    decoyHash ??= hashPassword(randomBytes(16).toString('hex'));
    await verify(await decoyHash, password).catch(() => false);
    return undefined;
  }
  const ok = await verify(record.passwordHash, password).catch(() => false);
  return ok ? toUser(record) : undefined;
}

function toUser(record: IdpUserRecord): IdpUser {
  return {
    username: record.username,
    subject: record.subject,
    name: record.name,
    email: record.email,
    roles: record.roles,
  };
}
