import assert from 'node:assert/strict';
import { describe, test } from '@jest/globals';
import spectralCore from '@stoplight/spectral-core';
import type * as SpectralCore from '@stoplight/spectral-core';
import spectralParsers from '@stoplight/spectral-parsers';
import type * as SpectralParsers from '@stoplight/spectral-parsers';
import owaspRuleset from '@stoplight/spectral-owasp-ruleset';
import { openapiDocument } from '../../src/http/rest/openapi.js';

// CommonJS packages: under ESM their exports arrive on the default export.
const { Spectral, Document } = spectralCore as unknown as typeof SpectralCore;
const { Json } = spectralParsers as unknown as typeof SpectralParsers;

/** Findings that must never come back: rate limiting, error responses and bounded arrays (issue 22). */
const FORBIDDEN = [
  'owasp:api4:2023-rate-limit',
  'owasp:api4:2023-rate-limit-retry-after',
  'owasp:api4:2023-rate-limit-responses-429',
  'owasp:api8:2023-define-error-validation',
  'owasp:api8:2023-define-error-responses-401',
  'owasp:api8:2023-define-error-responses-500',
  'owasp:api4:2023-array-limit',
];

/** The rules whose findings are accepted, and why; any other rule's finding fails, so that it is decided on. */
const ACCEPTED: Record<string, string> = {
  'owasp:api4:2023-string-limit':
    'what the server writes (ids and dates carry patterns or formats, problem texts are its own), and what it reads ' +
    'within the 64 kB body and 16 KB header limits, checked by the domain (an unknown SKU is a 422 with its pointer)',
  'owasp:api4:2023-string-restricted':
    'free text (titles, details, reasons, SKUs), an opaque cursor, entity-tag lists and Cache-Control directives',
  'owasp:api4:2023-integer-limit':
    'only `limit`: values above the page maximum behave as the maximum, so a `maximum` would refuse what is accepted',
  'owasp:api4:2023-integer-format':
    'only `limit`: any run of up to 20 digits is read and clamped, so no int32/int64 format describes it',
  'owasp:api8:2023-define-cors-origin':
    'CORS headers are sent only to the browser origins a deployment lists in CORS_ORIGINS (none by default) on an API ' +
    'of Bearer tokens; they describe a setting, not the API',
};

describe('the OpenAPI document under Spectral with the OWASP ruleset', () => {
  test('no rate-limit, error-definition or array-limit finding, and no finding of a rule not accepted', async () => {
    const spectral = new Spectral();
    // Its types describe the CommonJS build; ESM gets the ruleset itself (the package's `import` export).
    spectral.setRuleset(owaspRuleset as unknown as SpectralCore.RulesetDefinition);
    const document = new Document(JSON.stringify(openapiDocument, null, 2), Json, '/v1/openapi.json');
    const findings = await spectral.run(document);
    const where = (code: string) =>
      findings.filter((f) => f.code === code).map((f) => `${f.path.join('.')}: ${f.message}`);

    for (const code of FORBIDDEN) assert.deepEqual(where(code), [], code);
    const unaccepted = findings.filter((f) => !(String(f.code) in ACCEPTED));
    assert.deepEqual(
      unaccepted.map((f) => `${String(f.code)} at ${f.path.join('.')}: ${f.message}`),
      [],
    );
    // The two integer rules are accepted for the page sizes only (orders, webhook endpoints, their deliveries).
    for (const code of ['owasp:api4:2023-integer-limit', 'owasp:api4:2023-integer-format']) {
      assert.deepEqual(
        findings.filter((f) => f.code === code).map((f) => f.path.join('.')),
        [
          'paths./orders.get.parameters.0.schema',
          'paths./webhook-endpoints.get.parameters.0.schema',
          'paths./webhook-endpoints/{id}/deliveries.get.parameters.0.schema',
        ],
        code,
      );
    }
  });
});
