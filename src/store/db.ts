/** A column of a result's row description, as both drivers give it: its name and its type's OID (pg_type.oid). */
export interface ResultColumn {
  readonly name: string;
  readonly dataTypeID: number;
}

/** A statement's rows with its row description, which PostgreSQL sends even when there are no rows. */
export interface ResultSet<R = Record<string, unknown>> {
  readonly rows: R[];
  readonly fields: readonly ResultColumn[];
}

/** Anything SQL can be sent to: the database itself or an open transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** The same statement's rows with their row description, for store/rows.ts to check the shape once per result. */
  queryResult<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<ResultSet<R>>;
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Names this database among others, so cross-replica channels of different databases never mix. */
  readonly identity: string;
  /** Runs fn in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
  /** Called once per SQL statement sent, for metrics. */
  onStatement?: () => void;
  /**
   * Called when the database server stops answering connections (the circuit opens: calls fail at once) and when it
   * answers again. Never called for the embedded database.
   */
  onAvailability?: (available: boolean, cause?: unknown) => void;
}
