import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Relative imports that climb into one of these top-level folders (or files) of src/. */
const into = (...names) => `^(\\.\\./)+(${names.join('|')})(/|\\.js$)`;

/**
 * The folders of src/http/, by layer (docs/architecture.md). Names are unique across src/ and src/http/, so a relative
 * import that climbs into one is recognised by its name alone, from any depth.
 */
const TRANSPORTS = ['graphql', 'realtime', 'rest', 'browser', 'scim'];
const HTTP_FOLDERS = [...TRANSPORTS, 'pipeline', 'middleware', 'connections', 'problems', 'observability'];
/** An import of another http/ folder's inside, past the index.ts that is its public face. */
const PAST_INDEX = {
  regex: `^(\\.\\./)+(${HTTP_FOLDERS.join('|')})/(?!index\\.js$)`,
  message: "Import another http/ folder through its index.ts, the folder's public face.",
};
/** Nothing imports the composition root: it imports everything. */
const COMPOSITION_ROOT = {
  regex: into('app', 'server', 'main', 'cli'),
  message: 'No import runs back up: app.ts, server.ts, main.ts and cli/ import the rest, never the other way.',
};
const intoHttp = (names, message) => ({ regex: `^(\\.\\./)+(${names.join('|')})(/|$)`, message });
const packages = (names, message) => names.map((name) => ({ name, message }));

/**
 * OpenTelemetry's packages: only the SDK's module (imported on demand, when tracing is configured) loads them. Every
 * layer, domain/ and store/ included, calls the port instead, src/tracing.ts, which imports nothing.
 */
const OPENTELEMETRY = {
  regex: '^@opentelemetry/',
  message:
    'OpenTelemetry is loaded by http/observability/tracingSdk.ts alone, and only when tracing is on: call the port, src/tracing.ts.',
};

/**
 * no-restricted-imports for one layer: the database drivers and OpenTelemetry always (but in the tracing SDK's
 * module), plus its own packages and patterns.
 */
const layer = ({ paths = [], patterns = [], openTelemetry = false }) => [
  'error',
  {
    paths: [...DATABASE_DRIVERS, ...paths],
    patterns: [COMPOSITION_ROOT, ...(openTelemetry ? [] : [OPENTELEMETRY]), ...patterns],
  },
];

/** Driver packages: only store/ talks to a database. */
const DATABASE_DRIVERS = ['pg', '@electric-sql/pglite'].map((name) => ({
  name,
  message: 'Database access lives in src/store/; call a repository instead.',
}));

// SQL is recognised by its calls (`.query(`) and by its shape in string and template literals.
const SQL_SHAPE = '/^\\s*(select\\s[\\s\\S]*\\sfrom\\s|insert\\s+into\\s|update\\s+\\w+\\s+set\\s|delete\\s+from\\s)/i';
const SQL_ONLY_IN_STORE = [
  {
    selector: "CallExpression[callee.type='MemberExpression'][callee.property.name='query']",
    message: 'SQL lives in src/store/: add a repository function there and call it.',
  },
  { selector: `Literal[value=${SQL_SHAPE}]`, message: 'SQL lives in src/store/.' },
  { selector: `TemplateElement[value.raw=${SQL_SHAPE}]`, message: 'SQL lives in src/store/.' },
];

/**
 * An object literal with a getter or setter gives each object it makes hidden-class data of its own, which V8 keeps in
 * the old generation: made per request, it kept the request's loaders and all they reached alive through every
 * young-generation collection (bench/README.md, "Objects that outlive their request"). A class puts its accessors on the
 * prototype, once.
 */
const NO_LITERAL_ACCESSORS = [
  {
    selector: "ObjectExpression > Property[kind='get'], ObjectExpression > Property[kind='set']",
    message: 'Accessors go on a class, not on an object literal: see NO_LITERAL_ACCESSORS in eslint.config.js.',
  },
];

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      '.data/',
      'src/generated/',
      '__tests__/generated/',
      'scratch/',
      'bench/results/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  // The layers (docs/architecture.md): what each part of src/ may import. Import direction: transports → pipeline →
  // middleware → {problems, observability}; all of them → domain → ports ← store. Later entries replace earlier
  // ones for the files they match, so each layer lists all it forbids.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/store/**'],
    rules: {
      'no-restricted-syntax': ['error', ...SQL_ONLY_IN_STORE, ...NO_LITERAL_ACCESSORS],
      'no-restricted-imports': ['error', { paths: DATABASE_DRIVERS }],
    },
  },
  { files: ['src/store/**/*.ts'], rules: { 'no-restricted-syntax': ['error', ...NO_LITERAL_ACCESSORS] } },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/app.ts', 'src/server.ts', 'src/main.ts', 'src/cli/**'],
    rules: { 'no-restricted-imports': layer({}) },
  },
  // A transport imports no other transport, and nothing of http/ imports the resolvers (the schema is handed in).
  ...TRANSPORTS.map((transport) => ({
    files: [`src/http/${transport}/**/*.ts`],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          intoHttp(
            TRANSPORTS.filter((other) => other !== transport),
            `No transport imports another: what ${transport}/ shares with it belongs in pipeline/, middleware/ or problems/.`,
          ),
          { regex: into('resolvers'), message: 'http/ is handed the schema; it imports nothing from resolvers/.' },
          PAST_INDEX,
        ],
      }),
    },
  })),
  {
    files: ['src/http/pipeline/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        paths: packages(
          ['express', 'ws', 'graphql-ws', 'graphql-sse', 'cors', 'helmet'],
          'The pipeline serves every transport: it imports neither Express nor WebSocket.',
        ),
        patterns: [
          intoHttp(TRANSPORTS, 'The pipeline is under every transport: it imports none of them.'),
          { regex: into('resolvers'), message: 'http/ is handed the schema; it imports nothing from resolvers/.' },
          PAST_INDEX,
        ],
      }),
    },
  },
  {
    files: ['src/http/middleware/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          intoHttp(
            [...TRANSPORTS, 'pipeline'],
            'Middleware runs before the pipeline and the transports: it imports neither.',
          ),
          { regex: into('resolvers'), message: 'http/ is handed the schema; it imports nothing from resolvers/.' },
          PAST_INDEX,
        ],
      }),
    },
  },
  // The HTTP server's own connections (cap, body time bounds, drain): below every route, used by server.ts alone.
  {
    files: ['src/http/connections/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          intoHttp(
            [...TRANSPORTS, 'pipeline', 'middleware'],
            'connections/ works below every route: it imports no transport, the pipeline or middleware.',
          ),
          { regex: into('resolvers'), message: 'http/ is handed the schema; it imports nothing from resolvers/.' },
          PAST_INDEX,
        ],
      }),
    },
  },
  ...[
    ['problems', 'observability', ['src/http/problems/**/*.ts'], false],
    ['observability', 'problems', ['src/http/observability/**/*.ts'], false],
    // The one module that loads OpenTelemetry (observability/tracing.ts imports it on demand).
    ['observability', 'problems', ['src/http/observability/tracingSdk.ts'], true],
  ].map(([self, other, files, openTelemetry]) => ({
    files,
    rules: {
      'no-restricted-imports': layer({
        openTelemetry,
        patterns: [
          intoHttp(
            [...TRANSPORTS, 'pipeline', 'middleware', 'connections', other],
            `${self}/ is the bottom of http/: every other part imports it, and it imports none of them.`,
          ),
          { regex: into('resolvers'), message: 'http/ is handed the schema; it imports nothing from resolvers/.' },
        ],
      }),
    },
  })),
  // Webhook delivery works outside any request: it is handed the domain's ports and services by app.ts.
  {
    files: ['src/webhooks/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          {
            regex: into('store', 'http', 'auth', 'resolvers', 'generated', 'context', 'config'),
            message:
              'webhooks/ sends what the domain decides over the ports it is handed: it imports no store, transport or auth.',
          },
        ],
      }),
    },
  },
  {
    files: ['src/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        // Its own message for OpenTelemetry, below.
        openTelemetry: true,
        paths: packages(
          ['express', 'graphql', 'ioredis', 'pino'],
          'The domain knows no transport or infrastructure: declare a port in domain/ports.ts.',
        ),
        patterns: [
          {
            regex: '^@opentelemetry/',
            message: 'The domain knows no tracing SDK: src/tracing.ts is the port every layer, the domain too, calls.',
          },
          {
            regex: into('store', 'http', 'auth', 'resolvers', 'generated', 'config', 'context', 'html', 'logger'),
            message:
              'The domain imports nothing from store, http, auth or resolvers: declare a port in domain/ports.ts.',
          },
        ],
      }),
    },
  },
  {
    files: ['src/domain/model.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^\\.', message: 'The domain model is a leaf: it imports nothing from the project.' }] },
      ],
    },
  },
  {
    files: ['src/resolvers/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          { regex: into('store'), message: 'Resolvers call the domain, never the store.' },
          {
            regex: '^(\\.\\./)+http/(?!problems/index\\.js$)',
            message: 'Resolvers import nothing from http/ but the problem catalogue (http/problems/index.js).',
          },
        ],
      }),
    },
  },
  {
    files: ['src/context.ts'],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          {
            regex: '^\\./(?!domain/|tracing\\.js$)',
            message:
              'The context is built from the domain alone (the tracing port aside): every transport and resolver imports it.',
          },
        ],
      }),
    },
  },
  {
    files: ['src/auth/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          {
            regex: into('http', 'resolvers', 'context'),
            message: 'auth/ verifies credentials for every transport: it imports none of them.',
          },
        ],
      }),
    },
  },
  // Every layer reads the configuration, so it reads none of them (the domain's rules aside, such as acr values).
  {
    files: ['src/config/**/*.ts'],
    rules: {
      'no-restricted-imports': layer({
        patterns: [
          {
            regex: into('store', 'http', 'auth', 'resolvers', 'context', 'webhooks', 'generated', 'logger'),
            message: 'config/ models the environment; every layer imports it, and it imports none of them.',
          },
        ],
      }),
    },
  },
  {
    files: ['src/store/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            COMPOSITION_ROOT,
            OPENTELEMETRY,
            {
              regex: into('http', 'resolvers', 'auth', 'context'),
              message: 'The store implements the ports domain/ports.ts declares; it imports no layer above it.',
            },
          ],
        },
      ],
    },
  },
);
