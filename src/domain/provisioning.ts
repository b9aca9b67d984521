import {
  invalidValue,
  ProvisioningError,
  type DirectoryGroup,
  type DirectoryGroupInput,
  type DirectoryGroupWithMembers,
  type DirectoryPage,
  type DirectoryQuery,
  type DirectoryUser,
  type DirectoryUserInput,
  type GroupField,
  type UserField,
} from './directory.js';
import { entityTag, tagMatches, type Precondition } from './etags.js';
import { newId } from './ids.js';
import type { DirectoryFeed, DirectoryRepository, Storage } from './ports.js';

/** How many resources one list returns: unset means the default, more than the maximum means the maximum. */
export const DIRECTORY_PAGE = { default: 100, max: 1000 } as const;
/** Longest text attribute kept (userName, externalId, displayName, each part of a name, an email's value). */
export const MAX_TEXT = 256;
export const MAX_EMAILS = 20;

const USER_ID = /^usr_[0-9a-hjkmnp-tv-z]{26}$/;
const GROUP_ID = /^grp_[0-9a-hjkmnp-tv-z]{26}$/;

const notFound = (what: 'User' | 'Group', id: string) =>
  new ProvisioningError('NOT_FOUND', `${what} ${JSON.stringify(id.slice(0, 64))} was not found.`);

/** The 1-based index of the first result and how many at most, by SCIM's rules (RFC 7644 §3.4.2.4). */
export function pageWindow(startIndex: number | undefined, count: number | undefined) {
  const start = startIndex === undefined || startIndex < 1 ? 1 : startIndex;
  const limit = count === undefined ? DIRECTORY_PAGE.default : Math.min(Math.max(count, 0), DIRECTORY_PAGE.max);
  return { startIndex: start, offset: start - 1, limit };
}

function text(value: string | null, attribute: string, { required = false } = {}): void {
  if (value === null) {
    if (required) throw invalidValue(`${attribute} is required.`);
    return;
  }
  if (!value.trim()) throw invalidValue(`${attribute} must not be empty.`);
  if (value.length > MAX_TEXT) throw invalidValue(`${attribute} is longer than ${MAX_TEXT} characters.`);
}

/**
 * The userName as it is kept and compared: NFKC (a fullwidth or compatibility form is its plain twin) without the
 * code points Unicode says to ignore in display (zero-width space, BOM, soft hyphen...), so that a name cannot be
 * made unique by what no one sees (UTS #39's confusable twins of this kind).
 */
export const canonicalUserName = (userName: string) =>
  userName.normalize('NFKC').replace(/\p{Default_Ignorable_Code_Point}/gu, '');

function checkUser(input: DirectoryUserInput): void {
  text(input.userName, 'userName', { required: true });
  // Okta and Entra send sign-in names trimmed; one that is not would be unique only by its white space.
  if (input.userName.trim() !== input.userName) {
    throw invalidValue('userName must not begin or end with white space.');
  }
  text(input.externalId, 'externalId');
  text(input.displayName, 'displayName');
  for (const [part, value] of Object.entries(input.name ?? {})) if (value !== undefined) text(value, `name.${part}`);
  if (input.emails.length > MAX_EMAILS) throw invalidValue(`A user has at most ${MAX_EMAILS} emails.`);
  for (const email of input.emails) {
    text(email.value, 'emails.value', { required: true });
    if (email.type !== undefined) text(email.type, 'emails.type');
    if (email.display !== undefined) text(email.display, 'emails.display');
  }
  // RFC 7643 §2.4: the primary attribute value "true" MUST appear no more than once.
  if (input.emails.filter((e) => e.primary).length > 1) throw invalidValue('At most one email may be primary.');
}

function checkGroup(input: DirectoryGroupInput): void {
  text(input.displayName, 'displayName', { required: true });
  text(input.externalId, 'externalId');
}

const preconditionFailed = () =>
  new ProvisioningError(
    'PRECONDITION_FAILED',
    'The resource has changed since the version in If-Match; read it again.',
  );

/**
 * Provisioning from an organisation's directory: the use cases behind /scim/v2. Every write takes the directory's
 * turn (one at a time, so uniqueness is checked without races and revisions are in commit order), and once it has
 * committed the directory feed makes every replica's access rules (directoryAccess.ts) see it. A user going
 * inactive, or deleted, has their browser sessions revoked in the same transaction.
 */
export function createProvisioning(deps: { storage: Storage; feed: DirectoryFeed }) {
  const { storage, feed } = deps;
  const repo = storage.directory;

  /**
   * The writes of this replica queue here, in memory, before they take a connection: the turn in the database makes
   * writes of all replicas take turns, and a burst of them waiting for it inside open transactions would hold every
   * connection of the pool, and with them the orders' requests.
   */
  let queue: Promise<unknown> = Promise.resolve();

  /** A directory write: its turn, its transaction, then every replica's access rules told. */
  async function committed<T>(work: (tx: DirectoryRepository, revision: string) => Promise<T>): Promise<T> {
    const write = queue.then(() =>
      storage.transaction(async (tx) => work(tx.directory, await tx.directory.takeTurn())),
    );
    queue = write.catch(() => undefined);
    const result = await write;
    await feed.announce();
    return result;
  }

  async function uniqueUser(tx: DirectoryRepository, input: DirectoryUserInput, exceptId: string | null) {
    if (await tx.userNameTaken(input.userName, exceptId)) {
      throw new ProvisioningError('UNIQUENESS', `userName ${JSON.stringify(input.userName)} is already taken.`);
    }
    if (input.externalId !== null && (await tx.externalIdTaken(input.externalId, exceptId))) {
      throw new ProvisioningError('UNIQUENESS', `externalId ${JSON.stringify(input.externalId)} is already taken.`);
    }
  }

  /**
   * Sessions of someone who is (now) inactive end with the write that made them so: those signed in under the key
   * they had before it (the one their sessions carry) and under the key they have after it.
   */
  async function endSessions(tx: DirectoryRepository, before: DirectoryUser | null, after: DirectoryUser) {
    if (after.active) return;
    for (const key of new Set([before?.externalId ?? null, after.externalId])) {
      if (key === null || (before && !before.active && before.externalId === key)) continue;
      await tx.revokeSessionsOf(key);
    }
  }

  async function membersExist(tx: DirectoryRepository, ids: readonly string[]) {
    const live = await tx.liveUserIds(ids.filter((id) => USER_ID.test(id)));
    const missing = ids.find((id) => !live.has(id));
    if (missing !== undefined) {
      throw invalidValue(`Member ${JSON.stringify(missing.slice(0, 64))} is not a user of this directory.`);
    }
  }

  async function withMembers(groups: readonly DirectoryGroup[]): Promise<DirectoryGroupWithMembers[]> {
    const members = await repo.membersOf(groups.map((g) => g.id));
    return groups.map((g) => ({ ...g, members: members.get(g.id) ?? [] }));
  }

  const users = {
    async create(given: DirectoryUserInput): Promise<DirectoryUser> {
      const input = { ...given, userName: canonicalUserName(given.userName) };
      checkUser(input);
      return committed(async (tx, revision) => {
        await uniqueUser(tx, input, null);
        const user = await tx.insertUser(newId('usr'), input, revision);
        await endSessions(tx, null, user);
        return user;
      });
    },

    async get(id: string): Promise<DirectoryUser> {
      const user = USER_ID.test(id) ? await repo.findUser(id) : null;
      if (!user) throw notFound('User', id);
      return user;
    },

    async list(
      query: DirectoryQuery<UserField> | null,
      opts: { startIndex?: number; count?: number } = {},
    ): Promise<DirectoryPage<DirectoryUser>> {
      const window = pageWindow(opts.startIndex, opts.count);
      const { total, items } = await repo.listUsers(query, window);
      return { totalResults: total, startIndex: window.startIndex, items };
    },

    /**
     * Replaces what the directory says about a user with `change(current)` (PUT: the new representation; PATCH:
     * the operations applied), if `precondition` holds for the current version.
     */
    async modify(
      id: string,
      change: (current: DirectoryUser) => DirectoryUserInput,
      precondition?: Precondition,
    ): Promise<DirectoryUser> {
      if (!USER_ID.test(id)) throw notFound('User', id);
      return committed(async (tx, revision) => {
        const current = await tx.findUser(id);
        if (!current) throw notFound('User', id);
        if (!tagMatches(precondition, entityTag(current))) throw preconditionFailed();
        const changed = change(current);
        const input = { ...changed, userName: canonicalUserName(changed.userName) };
        checkUser(input);
        await uniqueUser(tx, input, id);
        // The deny list is keyed by what tokens and sessions carry: the key leaving the user keeps refusing what the
        // user refuses after this write (a rename or removal of externalId with active:false, a PUT without it).
        if (current.externalId !== null && input.externalId !== current.externalId) {
          await tx.keepRefusing(id, newId('usr'), revision, input.active);
        }
        const user = (await tx.updateUser(id, input, revision))!;
        await endSessions(tx, current, user);
        return user;
      });
    },

    /** Deletes the user: gone from lists and groups, and their tokens and sessions refused from now on. */
    async remove(id: string, precondition?: Precondition): Promise<void> {
      if (!USER_ID.test(id)) throw notFound('User', id);
      await committed(async (tx, revision) => {
        const current = await tx.findUser(id);
        if (!current) throw notFound('User', id);
        if (!tagMatches(precondition, entityTag(current))) throw preconditionFailed();
        await tx.deleteUser(id, revision);
        if (current.externalId !== null) await tx.revokeSessionsOf(current.externalId);
      });
    },
  };

  const groups = {
    async create(input: DirectoryGroupInput): Promise<DirectoryGroupWithMembers> {
      checkGroup(input);
      const created = await committed(async (tx, revision) => {
        if (await tx.groupNameTaken(input.displayName, null)) {
          throw new ProvisioningError('UNIQUENESS', `displayName ${JSON.stringify(input.displayName)} is taken.`);
        }
        const members = [...new Set(input.members)];
        await membersExist(tx, members);
        return tx.insertGroup(newId('grp'), { ...input, members }, revision);
      });
      return (await withMembers([created]))[0]!;
    },

    /** The group, with its members unless `members` is false (a directory that asked to leave them out). */
    async get(id: string, opts: { members: boolean }): Promise<DirectoryGroup | DirectoryGroupWithMembers> {
      const group = GROUP_ID.test(id) ? await repo.findGroup(id) : null;
      if (!group) throw notFound('Group', id);
      return opts.members ? (await withMembers([group]))[0]! : group;
    },

    async list(
      query: DirectoryQuery<GroupField> | null,
      opts: { startIndex?: number; count?: number; members: boolean },
    ): Promise<DirectoryPage<DirectoryGroup | DirectoryGroupWithMembers>> {
      const window = pageWindow(opts.startIndex, opts.count);
      const { total, items } = await repo.listGroups(query, window);
      return {
        totalResults: total,
        startIndex: window.startIndex,
        items: opts.members ? await withMembers(items) : items,
      };
    },

    /** Replaces the group with `change(current)`; members are written as what was added and what was removed. */
    async modify(
      id: string,
      change: (current: DirectoryGroupWithMembers) => DirectoryGroupInput,
      precondition?: Precondition,
    ): Promise<DirectoryGroupWithMembers> {
      if (!GROUP_ID.test(id)) throw notFound('Group', id);
      const updated = await committed(async (tx, revision) => {
        const found = await tx.findGroup(id);
        if (!found) throw notFound('Group', id);
        if (!tagMatches(precondition, entityTag(found))) throw preconditionFailed();
        const current = { ...found, members: (await tx.membersOf([id])).get(id) ?? [] };
        const input = change(current);
        checkGroup(input);
        if (await tx.groupNameTaken(input.displayName, id)) {
          throw new ProvisioningError('UNIQUENESS', `displayName ${JSON.stringify(input.displayName)} is taken.`);
        }
        const before = new Set(current.members.map((m) => m.id));
        const after = new Set(input.members);
        const added = [...after].filter((m) => !before.has(m));
        await membersExist(tx, added);
        const removed = [...before].filter((m) => !after.has(m));
        return (await tx.updateGroup(
          id,
          { displayName: input.displayName, externalId: input.externalId, added, removed },
          revision,
        ))!;
      });
      return (await withMembers([updated]))[0]!;
    },

    async remove(id: string, precondition?: Precondition): Promise<void> {
      if (!GROUP_ID.test(id)) throw notFound('Group', id);
      // The turn's new revision is what tells the replicas: a deleted group leaves no row to read.
      await committed(async (tx) => {
        const current = await tx.findGroup(id);
        if (!current) throw notFound('Group', id);
        if (!tagMatches(precondition, entityTag(current))) throw preconditionFailed();
        await tx.deleteGroup(id);
      });
    },
  };

  return { users, groups };
}

export type Provisioning = ReturnType<typeof createProvisioning>;
