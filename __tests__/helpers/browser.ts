import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createBrotliDecompress } from 'node:zlib';
import { chromium, type Browser } from 'playwright-core';

/** Debian's package, when the machine has it (`apt-get install chromium`). */
export const DEBIAN_CHROMIUM = '/usr/bin/chromium';
const SHIPPED = path.join(new URL('../../', import.meta.url).pathname, 'node_modules/@sparticuz/chromium');

/**
 * The browser the tests drive, never one downloaded: Debian's Chromium when it is installed, otherwise the headless
 * Chromium that the `@sparticuz/chromium` dev dependency ships brotli-compressed inside its npm package, unpacked once
 * per version under the OS temp directory. Only its binary is used, not the package's code or flags (made for AWS
 * Lambda: single process, web security off); the tests pass their own.
 */
export async function chromiumPath(): Promise<string> {
  if (existsSync(DEBIAN_CHROMIUM)) return DEBIAN_CHROMIUM;
  const packed = path.join(SHIPPED, 'bin/chromium.br');
  if (!existsSync(packed) || process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(
      `No Chromium: neither ${DEBIAN_CHROMIUM} (apt-get install chromium) nor @sparticuz/chromium's linux-x64 ` +
        'binary (npm install) is here.',
    );
  const { version } = JSON.parse(readFileSync(path.join(SHIPPED, 'package.json'), 'utf8')) as { version: string };
  const dir = path.join(tmpdir(), `orders-api-chromium-${version}`);
  const binary = path.join(dir, 'chromium');
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  // Test files run in parallel workers: each unpacks to a file of its own and renames it, so none runs a half-written one.
  const partial = `${binary}.${process.pid}.partial`;
  try {
    await pipeline(createReadStream(packed), createBrotliDecompress(), createWriteStream(partial, { mode: 0o755 }));
    renameSync(partial, binary);
  } finally {
    rmSync(partial, { force: true });
  }
  return binary;
}

/** Headless Chromium (see chromiumPath), sandbox off since the tests may run as root, no background traffic. */
export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: await chromiumPath(),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}
