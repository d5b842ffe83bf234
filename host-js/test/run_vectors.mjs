// Runs every shared vector (tests/vectors/*.json) through the JS host.
// The loader and matcher are a port of tests/common/mod.rs: the same files,
// the same count (cases, not story steps), the same matching rules.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

// The package by its name: in host-js itself the package's own index.mjs; in
// the empty project where scripts/test-js installs the packed tarball, the
// installed copy (the repository is then named by BACKSTOP_REPO).
import * as backstop from 'backstop';

const here = dirname(fileURLToPath(import.meta.url));
const root = process.env.BACKSTOP_REPO ?? join(here, '..', '..');
const packageDir = dirname(fileURLToPath(import.meta.resolve('backstop')));
const vectorDir = join(root, 'tests', 'vectors');
const U64_MAX = (1n << 64n) - 1n;

class Mismatch extends Error {}

const dump = (v) => JSON.stringify(v === undefined ? null : v);
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const own = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

/** A JSON number, or a string that parses as a u64 (Rust `str::parse::<u64>`). */
export function asF64(v) {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && /^\+?[0-9]+$/.test(v)) {
    const n = BigInt(v.replace('+', ''));
    return n <= U64_MAX ? Number(n) : null;
  }
  return null;
}

/** Checks `actual` against the `expected` subset; throws Mismatch on the first difference. */
export function matches(expected, actual, path) {
  if (actual === undefined) actual = null;
  if (isObject(expected)) {
    const keys = Object.keys(expected);
    if (keys.length === 1) {
      if (Array.isArray(expected.between)) {
        const n = asF64(actual);
        if (n === null) throw new Mismatch(`${path}: expected a number, got ${dump(actual)}`);
        const [lo, hi] = expected.between.map(asF64);
        if (lo <= n && n <= hi) return;
        throw new Mismatch(`${path}: ${n} not in [${lo}, ${hi}]`);
      }
      if (typeof expected.contains === 'string') {
        if (typeof actual === 'string' && actual.includes(expected.contains)) return;
        throw new Mismatch(`${path}: ${dump(actual)} does not contain ${dump(expected.contains)}`);
      }
      if (expected.absent === true) {
        if (actual === null) return;
        throw new Mismatch(`${path}: expected absent, got ${dump(actual)}`);
      }
    }
    if (!isObject(actual)) throw new Mismatch(`${path}: expected an object, got ${dump(actual)}`);
    for (const k of keys) matches(expected[k], own(actual, k) ? actual[k] : null, `${path}.${k}`);
    return;
  }
  if (Array.isArray(expected) && Array.isArray(actual)) {
    if (expected.length !== actual.length) {
      throw new Mismatch(`${path}: expected ${expected.length} items, got ${actual.length}: ${dump(actual)}`);
    }
    expected.forEach((ev, i) => matches(ev, actual[i], `${path}[${i}]`));
    return;
  }
  const x = asF64(expected);
  const y = asF64(actual);
  if (x !== null && y !== null) {
    if (x === y) return;
    throw new Mismatch(`${path}: expected ${dump(expected)}, got ${dump(actual)}`);
  }
  if (jsonEqual(expected, actual)) return;
  throw new Mismatch(`${path}: expected ${dump(expected)}, got ${dump(actual)}`);
}

function jsonEqual(a, b) {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => own(b, k) && jsonEqual(a[k], b[k]));
  }
  return a === b;
}

export function vectorFiles() {
  return readdirSync(vectorDir)
    .filter((n) => n.endsWith('.json'))
    .sort()
    .map((n) => [n, JSON.parse(readFileSync(join(vectorDir, n), 'utf8'))]);
}

/** [ok, result-or-error as JSON] for one call; the error shape is the Rust runner's. */
function answer(fn, step) {
  const input = step.input;
  try {
    if (fn === 'classify') return [true, backstop.classify(input)];
    if (fn === 'next_action' || fn === 'story') {
      const d = backstop.nextAction(input);
      // The record the component rendered is the same object as the data, key order included.
      const { record_json, ...rest } = d;
      const record = JSON.parse(record_json);
      assert.deepStrictEqual(record, rest, 'record_json differs from the decision');
      assert.deepStrictEqual(Object.keys(record), Object.keys(rest));
      return [true, d];
    }
    if (fn === 'signature') {
      const detail = typeof input.detail === 'string' ? input.detail : '';
      const check = typeof input.check === 'string' ? input.check : null;
      return [true, backstop.signature(detail, check)];
    }
  } catch (e) {
    if (e instanceof backstop.PolicyError) return [false, e.toJSON()];
    if (e instanceof backstop.InputError) return [false, { parse: e.message }];
    throw e;
  }
  throw new Error(`unknown function ${fn}`);
}

export function runAll() {
  let count = 0;
  const failures = [];
  for (const [file, v] of vectorFiles()) {
    const fn = v.function;
    for (const c of v.cases) {
      const id = c.id ?? '?';
      count += 1;
      const steps = fn === 'story' ? c.steps : [c];
      steps.forEach((step, i) => {
        const where = fn === 'story' ? `${file}/${id} step ${i + 1}` : `${file}/${id}`;
        const [ok, got] = answer(fn, step);
        const hasExp = own(step, 'expected');
        const hasErr = own(step, 'expected_error');
        try {
          if (ok && hasExp && !hasErr) matches(step.expected, got, 'result');
          else if (!ok && hasErr && !hasExp) matches(step.expected_error, got, 'error');
          else if (ok && hasErr && !hasExp) throw new Mismatch(`expected an error, got ${dump(got)}`);
          else if (!ok && hasExp && !hasErr) throw new Mismatch(`unexpected error ${dump(got)}`);
          else throw new Mismatch('a case needs exactly one of expected, expected_error');
        } catch (e) {
          if (!(e instanceof Mismatch)) throw e;
          failures.push(`${where}: ${e.message}`);
        }
      });
    }
  }
  return [count, failures];
}

test('every shared vector passes through the jco-transpiled component', () => {
  const t = performance.now();
  const [count, failures] = runAll();
  const ms = performance.now() - t;
  console.log(`js host: ${count} vectors (${ms.toFixed(0)} ms to run)`);
  assert.ok(count > 0, 'no vectors');
  assert.deepStrictEqual(failures, [], `${failures.length} of ${count} vectors failed`);
});

test('the matcher refuses what the Rust matcher refuses', () => {
  const refused = [
    [{ a: 1 }, { a: true }],
    [{ a: { absent: true } }, { a: 0 }],
    [[1], [1, 2]],
    [{ x: '5' }, { x: 6 }],
    [{ d: { between: [1, 3] } }, { d: 4 }],
    [{ s: { contains: 'z' } }, { s: 'abc' }],
  ];
  for (const [e, a] of refused) assert.throws(() => matches(e, a, 'result'), Mismatch, JSON.stringify([e, a]));
  matches({ x: '5', y: { absent: true }, z: [{ a: 1 }] }, { x: 5, z: [{ a: 1, b: 2 }] }, 'result');
});

test('the embedding example of docs/embedding.md runs as written', () => {
  const doc = readFileSync(join(root, 'docs', 'embedding.md'), 'utf8');
  const m = doc.match(/```js\n([\s\S]*?)```/);
  assert.ok(m, 'docs/embedding.md has no js example');
  assert.equal(m[1], readFileSync(join(here, 'example.mjs'), 'utf8'), 'the js example differs from test/example.mjs');
  const out = execFileSync(process.execPath, [join(here, 'example.mjs')], { cwd: here, encoding: 'utf8' });
  assert.equal(out.trim(), 'transient_transport api error: 529');
});

test('inputs are checked, errors carry field and rule, u64 round-trips', () => {
  const bad = [
    [{ situation: { step_failed: { attempt: 1, bogus: 1 } } }, 'situation.step_failed.bogus'],
    [{ situation: { nope: {} } }, 'situation'],
    [{ situation: { step_failed: { attempt: -1 } } }, 'situation.step_failed.attempt'],
    [{ situation: { step_failed: { attempt: 2 ** 32 } } }, 'situation.step_failed.attempt'],
    [{ situation: { step_failed: { attempt: 1, waited: '12x' } } }, 'situation.step_failed.waited'],
    [{ now: 1 }, 'situation'],
  ];
  for (const [input, path] of bad) {
    assert.throws(() => backstop.nextAction(input), (e) => e instanceof backstop.InputError && e.path === path, path);
  }
  assert.throws(
    () => backstop.nextAction({ config: { transport: { max_attempts: 11 } }, situation: { step_failed: { attempt: 1 } } }),
    (e) => e instanceof backstop.PolicyError && e.kind === 'invalid_config' && e.field === 'config.transport.max_attempts',
  );
  const cfg = backstop.defaultConfig();
  assert.equal(cfg.transport.max_attempts, 3);
  assert.equal(cfg.transport.budget, 300e9);
  assert.deepEqual(cfg.breakers.map((b) => b.kind), ['build', 'review']);
  const info = backstop.info();
  assert.deepEqual(Object.keys(info), ['package_version', 'schema_version', 'markers_digest', 'marker_count']);
  const d = backstop.nextAction({
    now: '1700000000000',
    entropy: (U64_MAX).toString(),
    situation: { step_failed: { attempt: 1, evidence: { text: 'API Error: 529 Overloaded' } } },
  });
  assert.equal(d.action, 'retry');
  assert.equal(typeof d.delay, 'number');
  assert.equal(backstop.signature('error: x 12', 'chk'), 'chk: error: x <n>');
  // The component writes a u64 as a JSON number; above 2^53 - 1 the wrapper
  // gives its exact decimal string (a BigInt input is written as one).
  const far = (1n << 60n) + 1n;
  const r = backstop.nextAction({
    now: far,
    situation: { run_stopped: { code: 'NETWORK_TRANSIENT' } },
    config: { resume: { max_resumes: 3 } },
  });
  assert.equal(r.action, 'resume');
  assert.equal(typeof r.resume_at, 'string');
  const ahead = BigInt(r.resume_at) - far; // exact: a double would round it to a multiple of 256
  assert.ok(ahead > 0n && ahead <= BigInt(r.delay) / 1_000_000n + 1n, `${ahead}`);
  assert.ok(JSON.parse(r.record_json).resume_at > 2 ** 53);
});

test('classifyWith applies the operator markers and refuses a bad one by field', () => {
  const marker = { class: 'work', marker: 'bundle_rejected', match: 'word', source: 'our deploy tool' };
  const evidence = { text: 'deployctl: BUNDLE_REJECTED after API Error: 529 Overloaded' };
  assert.equal(backstop.classify(evidence).class, 'transient_transport');
  const c = backstop.classifyWith(evidence, { classify: { markers: [marker] } });
  assert.deepEqual([c.class, c.signal, c.source], ['work', 'bundle_rejected', 'operator_marker']);
  assert.throws(
    () => backstop.classifyWith(evidence, { classify: { markers: [{ ...marker, marker: 'Bundle' }] } }),
    (e) => e instanceof backstop.PolicyError && e.field === 'config.classify.markers[0].marker',
  );
});
