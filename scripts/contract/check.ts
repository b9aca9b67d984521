import { readFileSync } from 'node:fs';
import { graphqlChanges } from './graphql.js';
import { openapiChanges, type ContractChange } from './openapi.js';

export interface ContractFiles {
  readonly graphqlReleased: string;
  readonly graphqlCurrent: string;
  readonly openapiReleased: string;
  /** The current REST contract: a file, or the document the code serves. */
  readonly openapiCurrent?: string;
}

export interface ContractReport {
  readonly graphql: readonly ContractChange[];
  readonly rest: readonly ContractChange[];
  readonly breaking: number;
}

/** Both contracts against their released snapshots; `breaking` > 0 means the change must not ship under /v1. */
export async function checkContracts(files: ContractFiles): Promise<ContractReport> {
  const current = files.openapiCurrent
    ? JSON.parse(readFileSync(files.openapiCurrent, 'utf8'))
    : JSON.parse(JSON.stringify((await import('../../src/http/rest/openapi.js')).openapiDocument));
  const graphql = await graphqlChanges(
    readFileSync(files.graphqlReleased, 'utf8'),
    readFileSync(files.graphqlCurrent, 'utf8'),
  );
  const rest = await openapiChanges(JSON.parse(readFileSync(files.openapiReleased, 'utf8')), current);
  const breaking = [...graphql, ...rest].filter((c) => c.level === 'breaking').length;
  return { graphql, rest, breaking };
}

export function formatReport(report: ContractReport): string {
  const lines: string[] = [];
  const section = (title: string, changes: readonly ContractChange[]) => {
    lines.push(`${title}: ${changes.length ? '' : 'no changes'}`);
    for (const level of ['breaking', 'dangerous', 'safe'] as const)
      for (const c of changes.filter((x) => x.level === level))
        lines.push(`  ${level.toUpperCase().padEnd(9)} ${c.message}`);
  };
  section('GraphQL schema (schema.graphql against schema.released.graphql)', report.graphql);
  section('REST contract (/v1 OpenAPI against openapi.released.json)', report.rest);
  lines.push(
    report.breaking
      ? `${report.breaking} breaking change(s): deprecate first and remove in a later release, or (REST) put the change under /v2.`
      : 'No breaking changes.',
  );
  return lines.join('\n');
}
