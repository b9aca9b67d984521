/** One schema change; each feature keeps its own in a file of this folder, listed in ../migrations.ts. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  /** Run one by one, in order, in the migration's transaction: a query carries exactly one statement. */
  readonly statements: readonly string[];
}
