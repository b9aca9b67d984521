import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Relative imports that climb into one of these top-level folders (or files) of src/. */
const into = (...names) => `^(\\.\\./)+(${names.join('|')})(/|\\.js$)`;

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

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.data/', 'src/generated/', 'scratch/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  // The layers (README "Architecture"): what each part of src/ may import.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/store/**'],
    rules: {
      'no-restricted-syntax': ['error', ...SQL_ONLY_IN_STORE],
      'no-restricted-imports': ['error', { paths: DATABASE_DRIVERS }],
    },
  },
  {
    files: ['src/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...DATABASE_DRIVERS,
            ...['express', 'graphql', 'ioredis', 'pino'].map((name) => ({
              name,
              message: 'The domain knows no transport or infrastructure: declare a port in domain/ports.ts.',
            })),
          ],
          patterns: [
            {
              regex: into(
                'store',
                'http',
                'auth',
                'resolvers',
                'generated',
                'cli',
                'app',
                'server',
                'config',
                'context',
              ),
              message:
                'The domain imports nothing from store, http, auth or resolvers: declare a port in domain/ports.ts.',
            },
          ],
        },
      ],
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
      'no-restricted-imports': [
        'error',
        {
          paths: DATABASE_DRIVERS,
          patterns: [{ regex: into('store'), message: 'Resolvers call the domain, never the store.' }],
        },
      ],
    },
  },
  {
    files: ['src/store/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: into('http', 'resolvers'), message: 'The store implements domain ports; it knows no transport.' },
          ],
        },
      ],
    },
  },
);
