import { tracing, type Attributes, type Span } from '../tracing.js';

/** What a statement's span says of it: computed once per distinct SQL text. */
interface Statement {
  /** `db.query.summary`, also the span's name: `SELECT orders`. */
  readonly summary: string;
  readonly attributes: Attributes;
}

const STATEMENTS = new Map<string, Statement>();
/** Statements are the store's literals, a few dozen; the bound only matters if something builds SQL dynamically. */
const MAX_STATEMENTS = 500;

/**
 * The statement with every literal replaced by `?`: quoted strings (also E'' and dollar-quoted ones), numbers that
 * are not part of a name or a `$n` parameter, and comments removed. Whitespace collapses to one space. Parameters
 * (`$1`) stay: their values are never recorded. Written here because no OpenTelemetry package sanitizes SQL
 * (@opentelemetry/sql-common only adds comments), and this must hold for both engines.
 */
export function sanitizeSql(sql: string): string {
  let out = '';
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i]!;
    const next = sql[i + 1];
    if (c === '-' && next === '-') {
      while (i < n && sql[i] !== '\n') i++;
      continue;
    }
    if (c === '/' && next === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 2;
      continue;
    }
    if (c === "'" || ((c === 'e' || c === 'E') && next === "'" && !/[\w$]/.test(sql[i - 1] ?? ''))) {
      const escapes = c !== "'";
      i += escapes ? 2 : 1;
      while (i < n) {
        if (escapes && sql[i] === '\\') i += 2;
        else if (sql[i] === "'" && sql[i + 1] === "'") i += 2;
        else if (sql[i] === "'") break;
        else i++;
      }
      i++;
      out += '?';
      continue;
    }
    if (c === '$' && !/[\w$]/.test(sql[i - 1] ?? '')) {
      const tag = /^\$([A-Za-z_]\w*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) {
        const end = sql.indexOf(tag[0], i + tag[0].length);
        i = end < 0 ? n : end + tag[0].length;
        out += '?';
        continue;
      }
      const param = /^\$\d+/.exec(sql.slice(i, i + 12));
      if (param) {
        out += param[0];
        i += param[0].length;
        continue;
      }
    }
    if (c === '"') {
      const end = sql.indexOf('"', i + 1);
      const stop = end < 0 ? n : end + 1;
      out += sql.slice(i, stop);
      i = stop;
      continue;
    }
    if (/[0-9]/.test(c) && !/[\w$.]/.test(sql[i - 1] ?? '')) {
      const number = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(sql.slice(i, i + 64))!;
      out += '?';
      i += number[0].length;
      continue;
    }
    if (/\s/.test(c)) {
      if (out && !out.endsWith(' ')) out += ' ';
      while (i < n && /\s/.test(sql[i]!)) i++;
      continue;
    }
    out += c;
    i++;
  }
  return out.trim();
}

const OPERATION = /^\(?\s*([a-z]+)/i;
const TARGET = /\b(?:from|into|update|join|table(?: if (?:not )?exists)?)\s+("[^"]+"|[a-z_][\w.]*)/i;

function describe(sql: string): Statement {
  let statement = STATEMENTS.get(sql);
  if (statement) return statement;
  const text = sanitizeSql(sql);
  const operation = OPERATION.exec(text)?.[1]?.toUpperCase() ?? 'SQL';
  const target = TARGET.exec(text)?.[1]?.replace(/"/g, '');
  const summary = target ? `${operation} ${target}` : operation;
  statement = {
    summary,
    attributes: {
      'db.operation.name': operation,
      'db.query.summary': summary,
      'db.query.text': text,
      ...(target ? { 'db.collection.name': target } : {}),
    },
  };
  if (STATEMENTS.size >= MAX_STATEMENTS) STATEMENTS.clear();
  STATEMENTS.set(sql, statement);
  return statement;
}

/** Each statement's attributes with each engine's (two objects per process at most): made once, not per span. */
const WITH_ENGINE = new WeakMap<Attributes, WeakMap<Statement, Attributes>>();

function attributesOf(statement: Statement, engine: Attributes): Attributes {
  let perStatement = WITH_ENGINE.get(engine);
  if (!perStatement) WITH_ENGINE.set(engine, (perStatement = new WeakMap()));
  let attributes = perStatement.get(statement);
  if (!attributes) perStatement.set(statement, (attributes = { ...engine, ...statement.attributes }));
  return attributes;
}

/**
 * A client span for one statement sent inside a recorded span, by OpenTelemetry's database conventions: named by its
 * summary (`SELECT orders`), with `db.system.name` and the engine's own attributes (`engine`), the operation and the
 * sanitized text; never a parameter's value. Undefined when there is no span to make (see `traced`).
 */
function statementSpan(sql: string, engine: Attributes): Span | undefined {
  const statement = describe(sql);
  const span = tracing.start(statement.summary, { kind: 'client', requireParent: true });
  // Set on the started span rather than given to start: the SDK cleans attributes given at start twice (before and
  // after sampling), set ones once; samplers here never read them.
  span?.setAttributes(attributesOf(statement, engine));
  return span;
}

/** Ends a statement's span; a failure is recorded by its SQLSTATE or error code, never its message (it can quote data). */
function statementEnded(span: Span, error?: unknown): void {
  if (error !== undefined) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') span.setAttribute('db.response.status_code', code);
    tracing.fail(span, typeof code === 'string' ? code : 'Error');
  }
  span.end();
}

async function sendInSpan<T>(span: Span, send: () => Promise<T>): Promise<T> {
  try {
    const result = await send();
    statementEnded(span);
    return result;
  } catch (error) {
    statementEnded(span, error);
    throw error;
  }
}

/**
 * Sends one statement (`send`) inside its span, when there is one to make: only inside a recorded span. With tracing
 * off, outside any span (the event bus's poll, the sweeper's deletes) and in a trace the sampler left out, the
 * statement is sent as it is, with nothing looked at or added (not even a promise).
 */
export function traced<T>(sql: string, engine: Attributes, send: () => Promise<T>): Promise<T> {
  if (!tracing.recording()) return send();
  const span = statementSpan(sql, engine);
  return span ? sendInSpan(span, send) : send();
}
