import { rmSync } from 'node:fs';

export default function globalTeardown() {
  const dir = process.env.ORDERS_TEST_RUN_DIR;
  if (dir) rmSync(dir, { recursive: true, force: true });
}
