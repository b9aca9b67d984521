import type { Request } from 'express';
import {
  getNamedType,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  BREAK,
  type DocumentNode,
  type GraphQLSchema,
} from 'graphql';
import { isStaff, type Principal } from '../../../domain/policy.js';
import type { GraphqlParams } from '../../pipeline/index.js';

/**
 * Types whose values change with order events: a response that selects one may hold an order. A connection's count
 * and page change with them though it selects no Order (`orders { totalCount }`), and so does a `Node` that may be one.
 */
const ORDER_TYPES = new Set(['Order', 'OrderItem', 'OrderConnection', 'OrderEdge', 'Node']);

/** A request that may be answered from the cache: its key, and what the store keeps of it. */
export interface Described {
  readonly key: string;
  readonly docHash: string;
  /** The document's hash and the operation name the request chose. */
  readonly operation: string;
  readonly variables: Record<string, unknown> | undefined;
}

/**
 * What a cached response depends on: the request (document hash, operation name, variables, Accept) and who is
 * asking (anonymous, or the subject with all its roles and scopes); and which order events can change it.
 */
export function createKeying(deps: {
  schema: GraphQLSchema;
  /** A request whose key is longer is executed and never stored. */
  maxKeyBytes: number;
  /** The customer id a subject is known by in this process, without asking the database. */
  knownCustomerId: (subject: string) => string | undefined;
}) {
  const { schema, maxKeyBytes, knownCustomerId } = deps;
  const visibilities = new WeakMap<Principal, string>();
  const readsOrders = new WeakMap<DocumentNode, boolean>();

  /** Who is asking, as far as a response can tell: anonymous, or this subject with exactly these roles and scopes. */
  function visibilityOf(principal: Principal): string {
    let v = visibilities.get(principal);
    if (v === undefined) {
      v =
        principal.kind === 'anonymous'
          ? 'anonymous'
          : JSON.stringify([principal.subject, [...principal.roles].sort(), [...principal.scopes].sort()]);
      visibilities.set(principal, v);
    }
    return v;
  }

  function documentReadsOrders(document: DocumentNode): boolean {
    let reads = readsOrders.get(document);
    if (reads === undefined) {
      reads = false;
      const typeInfo = new TypeInfo(schema);
      visit(
        document,
        visitWithTypeInfo(typeInfo, {
          Field() {
            const type = typeInfo.getType();
            if (type && ORDER_TYPES.has(getNamedType(type).name)) {
              reads = true;
              return BREAK;
            }
            return undefined;
          },
        }),
      );
      readsOrders.set(document, reads);
    }
    return reads;
  }

  return {
    /**
     * The key of a request that may be answered from the cache, or nothing: only requests in the shapes Apollo
     * accepts, whose document is named by its text or its hash, and whose key stays within the bound.
     */
    describe(
      req: Request,
      params: GraphqlParams,
      principal: Principal,
      /** The document's sha256, as the front door worked it out (persistedDocuments.ts). */
      docHash: string | undefined,
    ): Described | undefined {
      if (req.method === 'GET') {
        // Apollo refuses a GET with another Content-Type; such a request is left to it.
        if (req.headers['content-type'] !== undefined) return undefined;
        if ((params.sentJsonLength ?? 0) > maxKeyBytes) return undefined;
      }
      const operationName = params.operationName ?? '';
      if (docHash === undefined) return undefined;
      const vars = params.variables ?? undefined;
      const key = JSON.stringify([
        docHash,
        operationName,
        vars === undefined ? null : JSON.stringify(vars),
        req.headers.accept ?? null,
        visibilityOf(principal),
      ]);
      if (key.length > maxKeyBytes) return undefined;
      return { key, docHash, operation: `${docHash} ${operationName}`, variables: vars };
    },

    /** Which order events flush a response: 'staff', 'c:<customer id>', 'any' (every event), or null (none). */
    partitionOf(document: DocumentNode, principal: Principal): string | null {
      if (!documentReadsOrders(document)) return null;
      if (principal.kind !== 'user') return 'any';
      if (isStaff(principal)) return 'staff';
      const customerId = knownCustomerId(principal.subject);
      return customerId ? `c:${customerId}` : 'any';
    },
  };
}

export type Keying = ReturnType<typeof createKeying>;
