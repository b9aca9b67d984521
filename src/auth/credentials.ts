import { ACCOUNT_DEACTIVATED } from '../domain/directoryAccess.js';
import type { User } from '../domain/policy.js';
import { BoundTokenError, InvalidTokenError, type Presentation, type TokenVerifier } from './bearer.js';
import { InvalidDpopProofError } from './dpop.js';

/** Browser sessions: the cookie that names one, and its user. */
export interface SessionLookup {
  readonly cookieName: string;
  /** The session's user; null when unknown, idle too long, expired or revoked. */
  lookup(id: string): Promise<User | null>;
}

/** What a request or a connection presents to say who is calling: an access token, or a browser session's id. */
export type Credential =
  | { readonly kind: 'token'; readonly token: string; readonly presentation: Presentation }
  | { readonly kind: 'session'; readonly id: string };

/** A token presented as RFC 6750 Bearer: the same object for every request. */
export const BEARER: Presentation = Object.freeze({ scheme: 'bearer' });

/**
 * Why a credential was refused, the same on every transport, which says it in its own terms (a 401 challenge, a
 * WebSocket close code). `unverifiable`: the check itself failed (the issuer's keys or the session store cannot be
 * reached, or a bug), so nothing is known about the credential.
 */
export type Refusal =
  | {
      readonly reason: 'invalid_token' | 'bound_token' | 'invalid_dpop_proof' | 'deactivated';
      readonly message: string;
    }
  | { readonly reason: 'session_ended' }
  | { readonly reason: 'unverifiable'; readonly error: unknown };

/**
 * What the directory says of a caller whose credential is sound (domain/directoryAccess.ts): null when the person is
 * deactivated, else the caller with the roles the directory gives them.
 */
export interface DirectoryGate {
  admit(user: User): User | null;
}

class AccountDeactivated extends Error {
  constructor() {
    super(ACCOUNT_DEACTIVATED);
    this.name = 'AccountDeactivated';
  }
}

function admitted(directory: DirectoryGate, user: User): User {
  const admittedUser = directory.admit(user);
  if (!admittedUser) throw new AccountDeactivated();
  return admittedUser;
}

/**
 * Browser sessions as the directory has them: a deactivated person's session answers as ended (a deactivation also
 * revokes it in the database), and the roles are the directory's. For every reader of sessions: the one
 * authentication, the sign-in routes and the home page.
 */
export function sessionsAdmittedBy<S extends { touch(id: string): Promise<{ readonly user: User } | null> }>(
  store: S,
  directory: DirectoryGate,
): S {
  return {
    ...store,
    async touch(id: string) {
      const session = await store.touch(id);
      const user = session && directory.admit(session.user);
      return user ? { ...session, user } : null;
    },
  };
}

class SessionEnded extends Error {
  constructor() {
    super('The session has ended.');
    this.name = 'SessionEnded';
  }
}

/**
 * The one authentication, for HTTP (`authenticate`) and WebSocket (`onConnect`) alike: a credential in, the caller
 * out. A token is verified by the rules of its presentation (Bearer or DPoP); a session is looked up, when sessions
 * authenticate at all (`session` unset: tokens only, as on REST). Then the directory has its say, on every request
 * and independently of how the token was verified: a deactivated person is refused (`deactivated`) and the staff
 * role is the directory's when it manages it. Which credential a request presents, and that none means anonymous,
 * is the transport's to read; `callerOf` rejects a refused credential and `refusalOf` says why.
 */
export function createAuthentication<S extends SessionLookup | undefined = undefined>(
  verifier: TokenVerifier,
  session?: S,
  directory?: DirectoryGate,
) {
  const admit = directory && ((user: User) => admitted(directory, user));
  async function sessionUser(id: string): Promise<User> {
    const user = await session!.lookup(id);
    if (!user) throw new SessionEnded();
    return admit ? admit(user) : user;
  }
  return {
    /** Browser sessions, if their cookie authenticates here. */
    session: session as S,
    /** The caller a credential stands for; rejects when it is refused or cannot be checked (see refusalOf). */
    callerOf(credential: Credential): Promise<User> {
      if (credential.kind === 'session') return sessionUser(credential.id);
      // The verifier's own promise, with one step added for the directory: this runs for every request.
      const verified = verifier.verify(credential.token, credential.presentation);
      return admit ? verified.then(admit) : verified;
    },
    /** Why `callerOf` rejected. */
    refusalOf(error: unknown): Refusal {
      if (error instanceof SessionEnded) return { reason: 'session_ended' };
      if (error instanceof AccountDeactivated) return { reason: 'deactivated', message: error.message };
      if (error instanceof InvalidDpopProofError) return { reason: 'invalid_dpop_proof', message: error.message };
      if (error instanceof BoundTokenError) return { reason: 'bound_token', message: error.message };
      if (error instanceof InvalidTokenError) return { reason: 'invalid_token', message: error.message };
      return { reason: 'unverifiable', error };
    },
  };
}

export type Authentication<S extends SessionLookup | undefined = SessionLookup | undefined> = ReturnType<
  typeof createAuthentication<S>
>;
