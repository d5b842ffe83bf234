// Strings into the component: the package's glue encodes each string
// argument straight into linear memory (host-js/patch-gen.mjs). These cases
// cross every branch of that encoder: ASCII, which fits the first buffer;
// two-, three- and four-byte UTF-8, which grow it; a long text whose bytes
// outrun its UTF-16 length by thousands; a lone surrogate; an empty string.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

import * as backstop from 'backstop';

const packageDir = dirname(fileURLToPath(import.meta.resolve('backstop')));

test('the shipped glue is the one that encodes into linear memory', () => {
  const glue = readFileSync(join(packageDir, 'gen', 'backstop.js'), 'utf8');
  assert.match(glue, /Replaced by host-js\/patch-gen\.mjs/);
  assert.doesNotMatch(glue, /utf8Encoder\.encode\(s\)/);
});

test('a short text comes back whole in the echo, in every UTF-8 width', () => {
  for (const text of ['plain ASCII', 'é', 'naïve café', '日本語のログ', '😀', 'x😀y', 'ab'.repeat(40) + 'é日😀']) {
    assert.equal(backstop.classify({ text }).evidence, text, JSON.stringify(text));
  }
});

test('a long text of two-byte characters is read to its end', () => {
  const text = 'é'.repeat(3000) + '\nAPI Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}';
  const c = backstop.classify({ text });
  assert.equal(c.class, 'transient_transport');
  assert.ok(c.evidence.endsWith('"Overloaded"}}'), c.evidence.slice(-40));
  assert.ok(c.evidence.includes('é'));
});

test('a lone surrogate is encoded as U+FFFD, as TextEncoder does', () => {
  assert.equal(backstop.signature('step a\ud800b failed'), backstop.signature('step a\ufffdb failed'));
  assert.ok(backstop.signature('step a\ud800b failed').includes('a\ufffdb'));
  // A pair of surrogates is one character, four bytes of UTF-8.
  assert.ok(backstop.signature('step 😀 failed').includes('😀'));
});

test('an empty string crosses as empty', () => {
  assert.equal(backstop.signature(''), '');
  // An empty check names no check: the detail's signature alone.
  assert.equal(backstop.signature('x failed', ''), 'x failed');
  assert.equal(backstop.signature('x failed', 'c'), 'c: x failed');
});
