import { readdirSync } from 'node:fs';
import path from 'node:path';

/** The documentation: README.md, then every Markdown file of docs/, by name. Paths are relative to `root`. */
export function documentationFiles(root: string): string[] {
  const docs = readdirSync(path.join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}
