import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, test } from '@jest/globals';
import { documentationFiles } from '../../scripts/readme/files.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const BLOCK_TIMEOUT_MS = 90_000;
/** Blocks are independent (each signs in for itself), so a few run at once: most of each is npm and tsx starting. */
const BLOCKS_AT_ONCE = 3;

interface Example {
  readonly file: string;
  readonly line: number;
  readonly code: string;
  /** Each must match some line of the output (multiline regexes). */
  readonly expect: RegExp[];
  /** A stream a person would stop with Ctrl-C: success once the output matches, then the block is stopped. */
  readonly until?: RegExp;
  readonly skip?: string;
}

/**
 * Every ```sh and ```bash block of a Markdown file, with the `<!-- readme-check: … -->` comments just above it:
 * `skip (why)`, `expect REGEX` (any number) or `until REGEX`. A block without any still has to exit 0.
 */
function examples(file: string, text: string): Example[] {
  const lines = text.split('\n');
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
        file,
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
/** Runs at most `size` tasks at once, the others in the order they were handed in. */
function limiter(size: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (running >= size) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await task();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

type Outcome = { status: number | null; stdout: string; stderr: string; stopped: boolean };

function run(code: string, env: NodeJS.ProcessEnv, until?: RegExp) {
  return new Promise<Outcome>((resolve) => {
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

const files = documentationFiles(ROOT);
const all = files.flatMap((file) => examples(file, readFileSync(`${ROOT}${file}`, 'utf8')));
const runnable = all.filter((e) => !e.skip);

describe('every shell example in README.md and docs/*.md runs as written against a started server', () => {
  let server: TestServer;
  const outcomes = new Map<Example, Promise<Outcome>>();

  beforeAll(async () => {
    server = await startTestServer();
    const publicUrl = server.running.publicUrl;
    // The shell a reader has after the Quick start: the server's address known to npm run token.
    const env: NodeJS.ProcessEnv = { ...process.env, PUBLIC_URL: publicUrl, PORT: new URL(publicUrl).port };
    // Jest's own Node flags are not the reader's.
    delete env.NODE_OPTIONS;
    // What a reader has done by the time they replay alice's events (docs/subscriptions.md): created an order.
    const created = await server.http
      .post('/v1/orders')
      .set('Authorization', `Bearer ${await server.token('alice')}`)
      .set('Idempotency-Key', randomUUID())
      .send({ items: [{ sku: 'KB-001', qty: 1 }] });
    assert.equal(created.status, 201, created.text);
    // Every block starts here, a few at a time, in the order of the files; each test below awaits its own.
    const host = new URL(publicUrl).host;
    const slot = limiter(BLOCKS_AT_ONCE);
    for (const example of runnable) {
      outcomes.set(
        example,
        slot(() => run(example.code.replaceAll('localhost:4000', host), env, example.until)),
      );
    }
  });
  afterAll(async () => {
    await Promise.all(outcomes.values());
    await server?.close();
  });

  test('the README and every docs/ file with examples are read, and every block skipped says why', () => {
    assert.ok(files.includes('README.md') && files.some((f) => f.startsWith('docs/')), files.join(', '));
    assert.ok(runnable.some((e) => e.file === 'README.md'));
    assert.ok(runnable.length >= 5, `${runnable.length} runnable examples`);
    for (const e of all) if (e.skip !== undefined) assert.match(e.skip, /^\(.+\)$/, `${e.file}:${e.line}`);
  });

  for (const example of all) {
    const title = `${example.file}:${example.line} ${example.code.split('\n')[0]!.slice(0, 60)}`;
    if (example.skip) {
      test.skip(`${title} ${example.skip}`, () => undefined);
      continue;
    }
    test(title, async () => {
      const { status, stdout, stderr, stopped } = await outcomes.get(example)!;
      const shown = `exit ${status}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`;
      if (example.until) assert.ok(stopped, `the stream never printed ${example.until}\n${shown}`);
      else assert.equal(status, 0, shown);
      for (const pattern of example.expect) assert.match(stdout, pattern, shown);
      // A problem document or a GraphQL error in the output is a failed example, whatever the exit code.
      assert.doesNotMatch(stdout, /"type":"\/problems\/|"errors":\[/, shown);
    });
  }
});
