import { z } from 'zod';
import type {
  DirectoryGroup,
  DirectoryQuery,
  DirectoryUser,
  DirectoryUserInput,
  GroupField,
  UserField,
} from '../domain/directory.js';
import type { DirectoryRepository } from '../domain/ports.js';
import type { Queryable } from './db.js';
import { groupCondition, userCondition } from './directoryQuery.js';
import { revokeSessionsOf } from './sessions.js';

const int = z.coerce.number().int();
const text = z.string();
const timestamp = z.string();

const NameJson = z
  .object({
    formatted: text.optional(),
    familyName: text.optional(),
    givenName: text.optional(),
    middleName: text.optional(),
    honorificPrefix: text.optional(),
    honorificSuffix: text.optional(),
  })
  .nullable();
const EmailsJson = z.array(
  z.object({ value: text, type: text.optional(), primary: z.boolean().optional(), display: text.optional() }),
);

const UserRow = z.object({
  id: text,
  user_name: text,
  external_id: text.nullable(),
  display_name: text.nullable(),
  name: NameJson,
  emails: EmailsJson,
  active: z.boolean(),
  version: int,
  created_at: timestamp,
  updated_at: timestamp,
});

const GroupRow = z.object({
  id: text,
  display_name: text,
  external_id: text.nullable(),
  version: int,
  created_at: timestamp,
  updated_at: timestamp,
});

const MemberRow = z.object({ group_id: text, user_id: text, display: text });

const USER_COLUMNS = `u.id, u.user_name, u.external_id, u.display_name, u.name, u.emails, u.active, u.version,
  u.created_at, u.updated_at`;
const GROUP_COLUMNS = 'g.id, g.display_name, g.external_id, g.version, g.created_at, g.updated_at';

function toUser(row: unknown): DirectoryUser {
  const r = UserRow.parse(row);
  return {
    id: r.id,
    userName: r.user_name,
    externalId: r.external_id,
    displayName: r.display_name,
    name: r.name,
    emails: r.emails,
    active: r.active,
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toGroup(row: unknown): DirectoryGroup {
  const r = GroupRow.parse(row);
  return {
    id: r.id,
    displayName: r.display_name,
    externalId: r.external_id,
    version: r.version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const userParams = (input: DirectoryUserInput) => [
  input.userName,
  input.externalId,
  input.displayName,
  input.name === null ? null : JSON.stringify(input.name),
  JSON.stringify(input.emails),
  input.active,
];

/** The members of these groups, with each user's display name, by group then user id. */
async function membersOf(db: Queryable, groupIds: readonly string[]) {
  if (!groupIds.length) return new Map<string, { id: string; display: string }[]>();
  const rows = await db.query(
    `select m.group_id, m.user_id, coalesce(u.display_name, u.user_name) as display
     from directory_members m join directory_users u on u.id = m.user_id
     where m.group_id = any($1::text[]) order by m.group_id, m.user_id`,
    [groupIds],
  );
  const byGroup = new Map<string, { id: string; display: string }[]>();
  for (const row of rows) {
    const r = MemberRow.parse(row);
    let members = byGroup.get(r.group_id);
    if (!members) byGroup.set(r.group_id, (members = []));
    members.push({ id: r.user_id, display: r.display });
  }
  return byGroup;
}

async function page<T>(
  db: Queryable,
  from: string,
  columns: string,
  where: string,
  params: unknown[],
  opts: { offset: number; limit: number },
  map: (row: unknown) => T,
): Promise<{ total: number; items: T[] }> {
  const [counted] = await db.query(`select count(*) as n from ${from} where ${where}`, params);
  const total = int.parse((counted as { n: unknown }).n);
  if (!opts.limit || opts.offset >= total) return { total, items: [] };
  const rows = await db.query(
    `select ${columns} from ${from} where ${where}
     order by created_at, id offset $${params.length + 1} limit $${params.length + 2}`,
    [...params, opts.offset, opts.limit],
  );
  return { total, items: rows.map(map) };
}

/** The directory's SQL, over one connection or one open transaction. */
export function directoryRows(db: Queryable): DirectoryRepository {
  return {
    async takeTurn() {
      const [row] = await db.query(
        `update directory_state set revision = revision + 1 where id = 1 returning revision`,
      );
      return String((row as { revision: unknown }).revision);
    },

    async findUser(id) {
      const [row] = await db.query(
        `select ${USER_COLUMNS} from directory_users u where u.id = $1 and u.deleted_at is null`,
        [id],
      );
      return row ? toUser(row) : null;
    },

    listUsers(query: DirectoryQuery<UserField> | null, opts) {
      const params: unknown[] = [];
      const where = query ? `u.deleted_at is null and ${userCondition(query, params)}` : 'u.deleted_at is null';
      return page(db, 'directory_users u', USER_COLUMNS, where, params, opts, toUser);
    },

    async userNameTaken(userName, exceptId) {
      const rows = await db.query(
        `select 1 from directory_users
         where lower(user_name) = lower($1) and deleted_at is null and id is distinct from $2`,
        [userName, exceptId],
      );
      return rows.length > 0;
    },

    async externalIdTaken(externalId, exceptId) {
      const rows = await db.query(
        `select 1 from directory_users where external_id = $1 and deleted_at is null and id is distinct from $2`,
        [externalId, exceptId],
      );
      return rows.length > 0;
    },

    async insertUser(id, input, revision) {
      // A deleted user with the same externalId is what the new one replaces (one row per provisioned person); the
      // tokens it refused stay refused.
      const [row] = await db.query(
        `with replaced as (
           delete from directory_users where external_id = $3 and deleted_at is not null
           returning tokens_valid_after
         )
         insert into directory_users
           (id, user_name, external_id, display_name, name, emails, active, revision, tokens_valid_after)
         values ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8,
           case when $7 then (select max(tokens_valid_after) from replaced) else now() end)
         returning ${USER_COLUMNS.replace(/u\./g, '')}`,
        [id, ...userParams(input), revision],
      );
      return toUser(row);
    },

    async keepRefusing(userId, id, revision, activeAfter) {
      // The key of a user who is inactive, or goes inactive in this write, is refused outright, as after a deletion;
      // that of one who stays active only for the tokens issued before its last deactivation.
      await db.query(
        `insert into directory_users (id, user_name, external_id, active, revision, tokens_valid_after, deleted_at)
         select $2, u.user_name, u.external_id, u.active and $4::boolean, $3,
           case when u.active and $4::boolean then u.tokens_valid_after else now() end, now()
         from directory_users u
         where u.id = $1 and u.deleted_at is null and u.external_id is not null
           and (not (u.active and $4::boolean) or u.tokens_valid_after is not null)`,
        [userId, id, revision, activeAfter],
      );
    },

    async updateUser(id, input, revision) {
      const [row] = await db.query(
        `with replaced as (
           delete from directory_users where external_id = $3 and deleted_at is not null
           returning tokens_valid_after
         )
         update directory_users u set user_name = $2, external_id = $3, display_name = $4, name = $5::jsonb,
           emails = $6::jsonb, active = $7, revision = $8, version = u.version + 1, updated_at = now(),
           tokens_valid_after = greatest(
             case when u.active and not $7 then now() else u.tokens_valid_after end,
             (select max(tokens_valid_after) from replaced))
         where u.id = $1 and u.deleted_at is null
         returning ${USER_COLUMNS}`,
        [id, ...userParams(input), revision],
      );
      return row ? toUser(row) : null;
    },

    async deleteUser(id, revision) {
      const groups = await db.query(`delete from directory_members where user_id = $1 returning group_id`, [id]);
      if (groups.length) {
        await db.query(
          `update directory_groups set version = version + 1, revision = $2, updated_at = now()
           where id = any($1::text[])`,
          [groups.map((g) => (g as { group_id: string }).group_id), revision],
        );
      }
      const rows = await db.query(
        `update directory_users u set deleted_at = now(), active = false, revision = $2, version = u.version + 1,
           updated_at = now(), tokens_valid_after = case when u.active then now() else u.tokens_valid_after end
         where u.id = $1 and u.deleted_at is null returning u.id`,
        [id, revision],
      );
      return rows.length > 0;
    },

    revokeSessionsOf: (directoryKey) => revokeSessionsOf(db, directoryKey),

    async liveUserIds(ids) {
      if (!ids.length) return new Set();
      const rows = await db.query(`select id from directory_users where id = any($1::text[]) and deleted_at is null`, [
        ids,
      ]);
      return new Set(rows.map((r) => (r as { id: string }).id));
    },

    async findGroup(id) {
      const [row] = await db.query(`select ${GROUP_COLUMNS} from directory_groups g where g.id = $1`, [id]);
      return row ? toGroup(row) : null;
    },

    listGroups(query: DirectoryQuery<GroupField> | null, opts) {
      const params: unknown[] = [];
      const where = query ? groupCondition(query, params) : 'true';
      return page(db, 'directory_groups g', GROUP_COLUMNS, where, params, opts, toGroup);
    },

    membersOf: (groupIds) => membersOf(db, groupIds),

    async groupNameTaken(displayName, exceptId) {
      const rows = await db.query(
        `select 1 from directory_groups where lower(display_name) = lower($1) and id is distinct from $2`,
        [displayName, exceptId],
      );
      return rows.length > 0;
    },

    async insertGroup(id, input, revision) {
      const [row] = await db.query(
        `insert into directory_groups (id, display_name, external_id, revision) values ($1, $2, $3, $4)
         returning ${GROUP_COLUMNS.replace(/g\./g, '')}`,
        [id, input.displayName, input.externalId, revision],
      );
      if (input.members.length) {
        await db.query(
          `insert into directory_members (group_id, user_id)
           select $1, m from unnest($2::text[]) m on conflict do nothing`,
          [id, input.members],
        );
      }
      return toGroup(row);
    },

    async updateGroup(id, change, revision) {
      if (change.removed.length) {
        await db.query(`delete from directory_members where group_id = $1 and user_id = any($2::text[])`, [
          id,
          change.removed,
        ]);
      }
      if (change.added.length) {
        await db.query(
          `insert into directory_members (group_id, user_id)
           select $1, m from unnest($2::text[]) m on conflict do nothing`,
          [id, change.added],
        );
      }
      const [row] = await db.query(
        `update directory_groups g set display_name = $2, external_id = $3, revision = $4,
           version = g.version + 1, updated_at = now()
         where g.id = $1 returning ${GROUP_COLUMNS}`,
        [id, change.displayName, change.externalId, revision],
      );
      return row ? toGroup(row) : null;
    },

    async deleteGroup(id) {
      const rows = await db.query(`delete from directory_groups where id = $1 returning id`, [id]);
      return rows.length > 0;
    },
  };
}
