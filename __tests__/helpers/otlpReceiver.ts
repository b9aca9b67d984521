import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';

/** One span as the collector received it, whichever encoding the exporter used. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  readonly status: number;
  readonly resource: Readonly<Record<string, unknown>>;
  readonly scope: string;
}

export interface OtlpReceiver {
  /** OTEL_EXPORTER_OTLP_ENDPOINT for it. */
  readonly endpoint: string;
  /** Every span received so far. */
  spans(): readonly ReceivedSpan[];
  /** Content types of the export requests received (application/x-protobuf or application/json). */
  contentTypes(): readonly string[];
  /** Resolves once the spans received match `ready` (checked on every export), with them. */
  waitFor(ready: (spans: readonly ReceivedSpan[]) => boolean): Promise<readonly ReceivedSpan[]>;
  close(): Promise<void>;
}

const root = protobuf.parse(readFileSync(new URL('./otlp/trace.proto', import.meta.url), 'utf8')).root;
const Request = root.lookupType('opentelemetry.proto.ExportTraceServiceRequest');

type Any = Record<string, unknown>;

const hex = (value: unknown): string =>
  value === undefined || value === null
    ? ''
    : typeof value === 'string'
      ? // OTLP/JSON carries ids as hex already; protobufjs' toObject gives bytes as base64 when asked for strings.
        value
      : Buffer.from(value as Uint8Array).toString('hex');

function anyValue(value: Any | undefined): unknown {
  if (!value) return undefined;
  if ('stringValue' in value) return value.stringValue;
  if ('boolValue' in value) return value.boolValue;
  if ('intValue' in value) return Number(value.intValue);
  if ('doubleValue' in value) return Number(value.doubleValue);
  if ('arrayValue' in value) return ((value.arrayValue as Any).values as Any[] | undefined)?.map(anyValue) ?? [];
  if ('bytesValue' in value) return hex(value.bytesValue);
  return undefined;
}

const attributesOf = (list: unknown): Record<string, unknown> =>
  Object.fromEntries(((list as Any[] | undefined) ?? []).map((kv) => [kv.key as string, anyValue(kv.value as Any)]));

/** Both encodings normalized: protobufjs' object form of the binary request, or OTLP/JSON as sent. */
function spansOf(request: Any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of (request.resourceSpans as Any[] | undefined) ?? []) {
    const resource = attributesOf((rs.resource as Any | undefined)?.attributes);
    for (const ss of (rs.scopeSpans as Any[] | undefined) ?? []) {
      const scope = String((ss.scope as Any | undefined)?.name ?? '');
      for (const span of (ss.spans as Any[] | undefined) ?? []) {
        out.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: String(span.name),
          kind: Number(span.kind ?? 0),
          attributes: attributesOf(span.attributes),
          links: ((span.links as Any[] | undefined) ?? []).map((l) => ({
            traceId: hex(l.traceId),
            spanId: hex(l.spanId),
          })),
          status: Number((span.status as Any | undefined)?.code ?? 0),
          resource,
          scope,
        });
      }
    }
  }
  return out;
}

/**
 * A real OTLP/HTTP trace receiver on loopback: it decodes what the exporter sends (protobuf with protobufjs and the
 * OTLP messages, or OTLP/JSON) and answers as a collector does. Spans are kept in arrival order.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = [];
  const types: string[] = [];
  const waiters: {
    ready: (spans: readonly ReceivedSpan[]) => boolean;
    resolve: (s: readonly ReceivedSpan[]) => void;
  }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const type = String(req.headers['content-type'] ?? '');
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      types.push(type);
      const body = Buffer.concat(chunks);
      const json = type.startsWith('application/json');
      const request = json
        ? (JSON.parse(body.toString('utf8')) as Any)
        : (Request.toObject(Request.decode(body), { longs: String, defaults: false }) as Any);
      received.push(...spansOf(request));
      for (const w of [...waiters]) {
        if (!w.ready(received)) continue;
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve([...received]);
      }
      // An empty ExportTraceServiceResponse: full success.
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(json ? '{}' : undefined);
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans: () => received,
    contentTypes: () => types,
    waitFor(ready) {
      if (ready(received)) return Promise.resolve([...received]);
      return new Promise((resolve) => waiters.push({ ready, resolve }));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
