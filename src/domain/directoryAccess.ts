import type { DirectoryChanges } from './ports.js';
import { STAFF_ROLE, type User } from './policy.js';

/** Why a credential that verified is refused, or a stream that was open must end. */
export const ACCOUNT_DEACTIVATED = 'account deactivated';
export const ROLES_CHANGED = 'roles changed at the directory; reconnect';

interface KeyState {
  readonly active: boolean;
  /** Tokens issued before this second (the last deactivation) stay refused. */
  readonly tokensValidAfterSeconds: number | null;
}

/**
 * What the directory decides about a caller, on every request and every replica, without a query: whether the
 * person is deactivated (the deny list, keyed by the directory key: SCIM_LINK_CLAIM's value, `sub` by default), and
 * whether they are staff when the directory manages the staff group. The state is held in memory, filled from the
 * database at start and kept in sync by the directory feed (store/directoryFeed.ts): pushed over Redis, polled
 * without it. It is bounded by the number of provisioned users.
 *
 * Role precedence: when the directory has a staff group (SCIM_STAFF_GROUP), membership there decides the staff
 * role and the token's roles claim is ignored for it; otherwise the token's roles stand. The directory wins because
 * it is the system of record for joiners and leavers, and because a removal must take effect now, while a token
 * keeps the roles it was issued with until it expires.
 */
export function createDirectoryAccess() {
  const byKey = new Map<string, KeyState>();
  const keyOfId = new Map<string, string>();
  /** Directory keys of the staff group's members; null when the directory has no staff group. */
  let staff: ReadonlySet<string> | null = null;
  const listeners = new Set<() => void>();

  const refused = (user: User): boolean => {
    const key = user.directoryKey;
    if (key === undefined) return false;
    const state = byKey.get(key);
    if (!state) return false;
    if (!state.active) return true;
    // `iat` has whole seconds: a token issued in the second of the deactivation or later is let through, so a
    // token fetched right after a reactivation always works.
    return (
      state.tokensValidAfterSeconds !== null &&
      user.issuedAt !== undefined &&
      Math.floor(user.issuedAt / 1000) < state.tokensValidAfterSeconds
    );
  };

  const staffByDirectory = (user: User): boolean | null =>
    staff === null ? null : user.directoryKey !== undefined && staff.has(user.directoryKey);

  const access = {
    /**
     * The caller as the directory has them: null when deactivated (or the token predates the last deactivation),
     * else the same user, with the staff role granted or withdrawn when the directory manages it.
     */
    admit(user: User): User | null {
      if (byKey.size && refused(user)) return null;
      const isStaff = staffByDirectory(user);
      const byToken = user.roles.has(STAFF_ROLE);
      if (isStaff === null || isStaff === byToken) return user;
      const roles = new Set(user.roles);
      if (isStaff) roles.add(STAFF_ROLE);
      else roles.delete(STAFF_ROLE);
      return { ...user, roles, staffByToken: byToken };
    },

    /**
     * For a caller admitted earlier (an open stream): why it may no longer go on, or null. A stream that was
     * admitted with other roles than it would be now ends, so its subscriptions are authorised again: also when the
     * staff group is gone (deleted or renamed), and the token's own roles decide again.
     */
    verdictOn(admitted: User): string | null {
      if (refused(admitted)) return ACCOUNT_DEACTIVATED;
      const isStaff = staffByDirectory(admitted) ?? admitted.staffByToken ?? admitted.roles.has(STAFF_ROLE);
      if (isStaff !== admitted.roles.has(STAFF_ROLE)) return ROLES_CHANGED;
      return null;
    },

    /**
     * Whether the person with this directory key is deactivated now: for work done on someone's behalf outside a
     * request (a webhook endpoint's deliveries, for example).
     */
    isDeactivated(directoryKey: string): boolean {
      return byKey.get(directoryKey)?.active === false;
    },

    /** Takes in what the directory feed read: the whole state first, then each change. */
    apply(changes: DirectoryChanges): void {
      if (changes.full) {
        byKey.clear();
        keyOfId.clear();
      }
      for (const user of changes.users) {
        const before = keyOfId.get(user.id);
        if (before !== undefined && before !== user.key) byKey.delete(before);
        if (user.key === null) {
          keyOfId.delete(user.id);
          continue;
        }
        keyOfId.set(user.id, user.key);
        const tokensValidAfterSeconds =
          user.tokensValidAfter === null ? null : Math.floor(user.tokensValidAfter / 1000);
        // An active user who was never deactivated changes nothing: only what refuses someone is kept.
        if (user.active && tokensValidAfterSeconds === null) byKey.delete(user.key);
        else byKey.set(user.key, { active: user.active, tokensValidAfterSeconds });
      }
      staff = changes.staff;
      for (const listener of listeners) listener();
    },

    /** Called after every change is applied, so open streams can be judged again (`verdictOn`). */
    onChange(listener: () => void): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  return access;
}

export type DirectoryAccess = ReturnType<typeof createDirectoryAccess>;
