import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, test } from '@jest/globals';
import { graphqlChanges } from '../../scripts/contract/graphql.js';
import { openapiChanges } from '../../scripts/contract/openapi.js';

const released = readFileSync('schema.graphql', 'utf8');
const releasedRest = JSON.parse(readFileSync('openapi.released.json', 'utf8'));
const breaking = (changes: { level: string; message: string }[]) =>
  changes.filter((c) => c.level === 'breaking').map((c) => c.message);

/** The same edit, made to a schema text: it must apply, or the test would prove nothing. */
function edit(sdl: string, from: string | RegExp, to: string): string {
  const next = sdl.replace(from, to);
  assert.notEqual(next, sdl, `the edit ${String(from)} did not apply`);
  return next;
}

const withoutCustomer = (sdl: string) =>
  edit(sdl, /\n {2}"The customer who placed the order\."\n {2}customer: Customer!/, '');

describe('GraphQL contract check (graphql-inspector against the released schema)', () => {
  test('the checked-in schema is compatible with its released snapshot', async () => {
    const changes = await graphqlChanges(readFileSync('schema.released.graphql', 'utf8'), released);
    assert.deepEqual(breaking(changes), []);
  });

  test('removing Order.customer is breaking, and the message names it', async () => {
    assert.deepEqual(breaking(await graphqlChanges(released, withoutCustomer(released))), [
      "Field 'customer' was removed from object type 'Order'",
    ]);
  });

  test('making an argument required is breaking, and the message names it', async () => {
    const required = edit(
      released,
      'recentOrders("How many orders to return, 0 to 100." first: Int = 20)',
      'recentOrders("How many orders to return, 0 to 100." first: Int!)',
    );
    const messages = breaking(await graphqlChanges(released, required));
    assert.ok(
      messages.some((m) => m.includes("'first'") && m.includes('Query.recentOrders')),
      messages.join('\n'),
    );
  });

  test('the same removal passes once a release has deprecated the member', async () => {
    const deprecated = edit(
      released,
      'customer: Customer!',
      'customer: Customer! @deprecated(reason: "Use customerId.")',
    );
    const changes = await graphqlChanges(deprecated, withoutCustomer(deprecated));
    assert.deepEqual(breaking(changes), []);
    assert.ok(changes.some((c) => c.level === 'dangerous' && c.message.includes("'customer'")));
  });

  test('removing the deprecated Order.status passes; removing an argument that was never deprecated does not', async () => {
    const withoutStatus = edit(
      released,
      /\n {2}"One of `pending`[^\n]*\n {2}status: String!\n\s+@deprecated\([^\n]*\)/,
      '',
    );
    assert.deepEqual(breaking(await graphqlChanges(released, withoutStatus)), []);
    const withoutArg = edit(
      released,
      /(cancelOrder\(\n\s+"The order to cancel\."\n\s+id: ID!)\n\s+"[^"]*"\n\s+etag: String/,
      '$1',
    );
    assert.equal(breaking(await graphqlChanges(released, withoutArg)).length > 0, true);
  });

  test('a new enum value is listed as dangerous without failing', async () => {
    const changes = await graphqlChanges(released, edit(released, '  CANCELLED\n}', '  CANCELLED\n  REFUNDED\n}'));
    assert.deepEqual(breaking(changes), []);
    assert.ok(changes.some((c) => c.level === 'dangerous' && c.message.includes('REFUNDED')));
  });
});

describe('REST contract check (openapi-diff against openapi.released.json)', () => {
  const clone = () => JSON.parse(JSON.stringify(releasedRest));

  test('the served document is compatible with its released snapshot', async () => {
    const { openapiDocument } = await import('../../src/http/rest/openapi.js');
    assert.deepEqual(breaking(await openapiChanges(releasedRest, JSON.parse(JSON.stringify(openapiDocument)))), []);
  });

  test('removing a response member is breaking, and the message names the member and where', async () => {
    const next = clone();
    const order = next.components.schemas.Order;
    delete order.properties.total_cents;
    order.required = order.required.filter((m: string) => m !== 'total_cents');
    const messages = breaking(await openapiChanges(releasedRest, next));
    assert.ok(messages.length > 0);
    assert.ok(
      messages.every((m) => m.includes('total_cents')),
      messages.join('\n'),
    );
    assert.ok(
      messages.some((m) => m.includes('paths./orders/{id}.get.responses.200')),
      messages.join('\n'),
    );
  });

  test('a new required request member is breaking', async () => {
    const next = clone();
    const body = next.components.schemas.NewOrder;
    body.properties.note = { type: 'string' };
    body.required = [...body.required, 'note'];
    const messages = breaking(await openapiChanges(releasedRest, next));
    assert.deepEqual(messages, [
      'request.body.scope.remove at paths./orders.post.requestBody.content.application/json.schema',
    ]);
  });

  test('a narrowed request type and a removed operation are breaking', async () => {
    const next = clone();
    next.components.schemas.NewOrderLine.properties.qty.maximum = 99;
    delete next.paths['/orders/{id}'].delete;
    const messages = breaking(await openapiChanges(releasedRest, next));
    assert.ok(
      messages.some((m) => m.startsWith('request.body.scope.remove')),
      messages.join('\n'),
    );
    assert.ok(messages.includes('method.remove at paths./orders/{id}.delete'), messages.join('\n'));
  });

  test('a merge-patch body is checked too: a new required member is breaking, accepting application/json beside it is not', async () => {
    const narrowed = clone();
    narrowed.components.schemas.OrderPatch.required = ['status'];
    assert.deepEqual(breaking(await openapiChanges(releasedRest, narrowed)), [
      'request.body.scope.remove at paths./orders/{id}.patch.requestBody.content.application/json.schema',
    ]);
    const widened = clone();
    const content = widened.paths['/orders/{id}'].patch.requestBody.content;
    content['application/json'] = content['application/merge-patch+json'];
    assert.deepEqual(breaking(await openapiChanges(releasedRest, widened)), []);
  });

  test('new optional members, in requests and responses, are compatible', async () => {
    const next = clone();
    next.components.schemas.Order.properties.note = { type: 'string' };
    next.components.schemas.NewOrder.properties.note = { type: 'string' };
    assert.deepEqual(breaking(await openapiChanges(releasedRest, next)), []);
  });

  test('removing a response member that a release marked deprecated passes', async () => {
    const deprecated = clone();
    deprecated.components.schemas.Order.properties.total_cents.deprecated = true;
    const next = JSON.parse(JSON.stringify(deprecated));
    delete next.components.schemas.Order.properties.total_cents;
    next.components.schemas.Order.required = next.components.schemas.Order.required.filter(
      (m: string) => m !== 'total_cents',
    );
    assert.deepEqual(breaking(await openapiChanges(deprecated, next)), []);
  });
});

describe('npm run schema:check', () => {
  const run = (args: string[]) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/schema-check.ts', ...args]).then(
      (r) => ({ code: 0, out: r.stdout }),
      (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
    );

  test('exits 0 on the checked-in contracts and 1 on a breaking edit, naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'orders-api-contract-'));
    const broken = join(dir, 'schema.graphql');
    writeFileSync(broken, withoutCustomer(released));
    // Two independent processes, seconds of start-up each: side by side.
    const [passed, failed] = await Promise.all([run([]), run(['--graphql', broken])]);
    assert.equal(passed.code, 0);
    assert.equal(failed.code, 1);
    assert.match(failed.out, /BREAKING {2}Field 'customer' was removed from object type 'Order'/);
    assert.match(failed.out, /1 breaking change\(s\)/);
  });
});
