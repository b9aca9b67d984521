import { existsSync } from 'node:fs';
import { arch } from 'node:os';

/** Debian's multiarch directory, by Node's name for the architecture. */
const MULTIARCH: Partial<Record<string, string>> = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

/**
 * The allocator the production image runs node with: jemalloc, preloaded (Dockerfile). Over a 10-minute soak of churning
 * streams glibc's malloc kept 4–8 % more RSS at the end than after the warm-up while the JavaScript heap shrank
 * (bench/README.md), memory it held rather than gave back. The bench runs its server children (the app, its replicas,
 * the floors and the peers alike) as the image does when Debian's libjemalloc2 is installed here, and says which ran.
 */
export const IMAGE_ALLOCATOR = imageAllocator();

function imageAllocator(): { readonly env: Record<string, string>; readonly name: string } {
  if (process.env.LD_PRELOAD?.includes('jemalloc'))
    return { env: {}, name: `jemalloc (LD_PRELOAD=${process.env.LD_PRELOAD})` };
  const dir = MULTIARCH[arch()];
  const lib = dir && `/usr/lib/${dir}/libjemalloc.so.2`;
  if (lib && existsSync(lib)) return { env: { LD_PRELOAD: lib }, name: 'jemalloc, as the image' };
  return {
    env: {},
    name: "glibc's malloc, not the image's jemalloc: Debian's libjemalloc2 is not installed (apt-get install libjemalloc2)",
  };
}
