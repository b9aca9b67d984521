import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const BLOCK_TIMEOUT_MS = 90_000;

interface Example {
  readonly line: number;
  readonly code: string;
  /** Each must match some line of the output (multiline regexes). */
  readonly expect: RegExp[];
  /** A stream a person would stop with Ctrl-C: success once the output matches, then the block is stopped. */
  readonly until?: RegExp;
  readonly skip?: string;
}

/**
 * Every ```sh and ```bash block of README.md, with the `<!-- readme-check: … -->` comments just above it:
 * `skip (why)`, `expect REGEX` (any number) or `until REGEX`. A block without any still has to exit 0.
 */
function examples(readme: string): Example[] {
  const lines = readme.split('\n');
  const found: Example[] = [];
  let notes: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const note = /^<!-- readme-check: (.*) -->$/.exec(lines[i]!);
    if (note) {
      notes.push(note[1]!);
      continue;
    }
    if (/^```(sh|bash)$/.test(lines[i]!)) {
      const end = lines.indexOf('```', i + 1);
      const code = lines.slice(i + 1, end).join('\n');
      const skip = notes.find((n) => n.startsWith('skip '));
      const until = notes.find((n) => n.startsWith('until '));
      found.push({
        line: i + 1,
        code,
        expect: notes.filter((n) => n.startsWith('expect ')).map((n) => new RegExp(n.slice(7), 'm')),
        ...(until ? { until: new RegExp(until.slice(6), 'm') } : {}),
        ...(skip ? { skip: skip.slice(5) } : {}),
      });
      i = end;
    }
    if (lines[i]!.trim() !== '') notes = [];
  }
  return found;
}

/** Runs one block in a fresh bash (errexit, pipefail) from the project root, as a person would paste it. */
function run(code: string, env: NodeJS.ProcessEnv, until?: RegExp) {
  return new Promise<{ status: number | null; stdout: string; stderr: string; stopped: boolean }>((resolve) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', code], { cwd: ROOT, env, detached: true });
    let stdout = '';
    let stderr = '';
    let stopped = false;
    const stop = () => {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(stop, BLOCK_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (until && !stopped && until.test(stdout)) {
        stopped = true;
        stop();
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, stopped });
    });
  });
}

const readme = readFileSync(new URL('README.md', `file://${ROOT}`), 'utf8');
const all = examples(readme);

describe('every shell example in README.md runs as written against a started server', () => {
  let server: TestServer;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    server = await startTestServer();
    const publicUrl = server.running.publicUrl;
    // The shell a reader has after the Quick start: the server's address known to npm run token.
    env = { ...process.env, PUBLIC_URL: publicUrl, PORT: new URL(publicUrl).port };
    // Jest's own Node flags are not the reader's.
    delete env.NODE_OPTIONS;
  });
  afterAll(() => server?.close());

  test('the README has runnable examples, and every block it skips says why', () => {
    assert.ok(all.filter((e) => !e.skip).length >= 5);
    for (const e of all) if (e.skip !== undefined) assert.match(e.skip, /^\(.+\)$/, `README.md:${e.line}`);
  });

  for (const example of all) {
    const title = `README.md:${example.line} ${example.code.split('\n')[0]!.slice(0, 60)}`;
    if (example.skip) {
      test.skip(`${title} ${example.skip}`, () => undefined);
      continue;
    }
    test(title, async () => {
      const code = example.code.replaceAll('localhost:4000', new URL(server.running.publicUrl).host);
      const { status, stdout, stderr, stopped } = await run(code, env, example.until);
      const shown = `exit ${status}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`;
      if (example.until) assert.ok(stopped, `the stream never printed ${example.until}\n${shown}`);
      else assert.equal(status, 0, shown);
      for (const pattern of example.expect) assert.match(stdout, pattern, shown);
      // A problem document or a GraphQL error in the output is a failed example, whatever the exit code.
      assert.doesNotMatch(stdout, /"type":"\/problems\/|"errors":\[/, shown);
    });
  }
});
