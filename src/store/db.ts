/** A column of a result's row description, as both drivers give it: its name and its type's OID (pg_type.oid). */
export interface ResultColumn {
  readonly name: string;
  readonly dataTypeID: number;
}

/**
 * A statement's rows with its row description, which PostgreSQL sends even when there are no rows. Each row is an
 * array of its values in the order of `fields`: the drivers make no object per row that store/rows.ts would only copy
 * (pg builds it property by property, through stores that a program with many statements' columns makes megamorphic:
 * 65–84 µs against 15–25 µs for 100 rows, bench/README.md).
 */
export interface ResultSet {
  readonly rows: readonly (readonly unknown[])[];
  readonly fields: readonly ResultColumn[];
}

/** Anything SQL can be sent to: the database itself or an open transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** The same statement's rows as arrays with their row description, for store/rows.ts to check once per result. */
  queryResult(sql: string, params?: readonly unknown[]): Promise<ResultSet>;
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
