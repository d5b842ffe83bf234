// The package as shipped: one version everywhere, the contract check, the
// declarations of index.d.ts against jco's declarations of the WIT, and what the
// package carries. scripts/test-js runs this in an empty npm project where
// the packed tarball is installed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { dirname, join, relative } from 'node:path';

import * as backstop from 'backstop';

const here = dirname(fileURLToPath(import.meta.url));
const root = process.env.BACKSTOP_REPO ?? join(here, '..', '..');
const packageDir = dirname(fileURLToPath(import.meta.resolve('backstop')));
const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));

function crateVersion() {
  const cargo = readFileSync(join(root, 'Cargo.toml'), 'utf8');
  const m = cargo.match(/^\[package\][^[]*?^version = "([^"]+)"/m);
  assert.ok(m, 'Cargo.toml has no [package] version');
  return m[1];
}

/** `v` with its major (0), minor (1) or patch (2) raised by one, the parts after it zeroed. */
function bumped(v, part) {
  const n = v.split('.').map(Number);
  n[part] += 1;
  for (let i = part + 1; i < 3; i += 1) n[i] = 0;
  return n.join('.');
}

test('one version: crate, WIT package, npm package, lock file, component info()', () => {
  const version = crateVersion();
  const wits = readdirSync(join(root, 'wit')).filter((n) => n.endsWith('.wit'));
  assert.ok(wits.length > 0);
  for (const w of wits) {
    const m = readFileSync(join(root, 'wit', w), 'utf8').match(/^package backstop:policy@(\S+);/m);
    assert.equal(m && m[1], version, `wit/${w}`);
  }
  assert.equal(readJson(join(packageDir, 'package.json')).version, version, 'the installed package.json');
  assert.equal(readJson(join(root, 'host-js', 'package.json')).version, version, 'host-js/package.json');
  const lock = readJson(join(root, 'host-js', 'package-lock.json'));
  assert.equal(lock.version, version, 'package-lock.json');
  assert.equal(lock.packages[''].version, version, 'package-lock.json packages[""]');
  assert.equal(backstop.version, version);
  assert.equal(backstop.info().package_version, version);
});

test('a component of another major or minor contract is refused, naming both versions', () => {
  const mine = backstop.version;
  for (const other of [bumped(mine, 0), bumped(mine, 1)]) {
    assert.throws(
      () => backstop.checkContract({ ...backstop.info(), package_version: other }),
      (e) => e instanceof backstop.ContractError && e.message.includes(other) && e.message.includes(mine)
        && e.componentVersion === other && e.hostVersion === mine,
      other,
    );
  }
  backstop.checkContract({ ...backstop.info(), package_version: bumped(mine, 2) });
  for (const bad of [{ package_version: '0.1' }, { package_version: 1 }, {}, null]) {
    assert.throws(() => backstop.checkContract(bad), backstop.ContractError, JSON.stringify(bad));
  }
});

test('the rule from 1.0 on: same major, the component minor at least the package minor', () => {
  assert.ok(backstop.supportsContract('1.2.0', '1.2.5'));
  assert.ok(backstop.supportsContract('1.4.1', '1.2.0'));
  assert.ok(!backstop.supportsContract('1.1.9', '1.2.0'));
  assert.ok(!backstop.supportsContract('2.0.0', '1.2.0'));
  assert.ok(!backstop.supportsContract('0.2.0', '0.1.0'));
  assert.ok(backstop.supportsContract('0.1.7', '0.1.0'));
  // Before 1.0 a patch may add functions the package calls: an older patch is refused.
  assert.ok(!backstop.supportsContract('0.2.0', '0.2.1'));
  assert.ok(backstop.supportsContract('0.2.3', '0.2.1'));
});

test('importing a package whose version speaks another contract than its component throws ContractError', () => {
  const dir = mkdtempSync(join(tmpdir(), 'backstop-contract-'));
  try {
    const copy = join(dir, 'backstop');
    cpSync(packageDir, copy, { recursive: true, filter: (src) => !relative(packageDir, src).startsWith('node_modules') });
    const pkg = readJson(join(copy, 'package.json'));
    const real = pkg.version;
    pkg.version = bumped(real, 1);
    writeFileSync(join(copy, 'package.json'), JSON.stringify(pkg));
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(join(copy, 'index.mjs'))})`], {
      encoding: 'utf8',
    });
    assert.notEqual(run.status, 0);
    assert.match(run.stderr, /ContractError/);
    assert.ok(run.stderr.includes(`contract version ${real} `), run.stderr);
    assert.ok(run.stderr.includes(`npm package ${pkg.version} `), run.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the package ships the transpiled component and declarations, and depends on nothing', () => {
  const pkg = readJson(join(packageDir, 'package.json'));
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.peerDependencies, undefined);
  for (const f of ['index.mjs', 'index.d.ts', 'gen/backstop.js', 'gen/backstop.d.ts', 'gen/backstop.core.wasm']) {
    assert.ok(readFileSync(join(packageDir, f)).length > 0, f);
  }
  const gen = readFileSync(join(packageDir, 'gen', 'backstop.js'), 'utf8');
  const imports = [...gen.matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1]);
  assert.ok(imports.every((s) => s.startsWith('node:') || s.startsWith('.')), `gen imports ${imports}`);
});

/** The body of `export interface Name { ... }` or `export type Name = ...;` in index.d.ts. */
function declaration(dts, name) {
  const m = dts.match(new RegExp(`export interface ${name} \\{\\n([\\s\\S]*?)\\n\\}`))
    ?? dts.match(new RegExp(`export type ${name} =([\\s\\S]*?);\\n`));
  assert.ok(m, `index.d.ts does not declare ${name}`);
  return m[1];
}

// Records the wrapper reads (fields may be left out, except those the model
// requires) and those it returns (every field present).
const INPUTS = new Set(['StepReport', 'Header', 'Evidence', 'StepFailure', 'HistoryEvent', 'WorkFailure',
  'TaskFailure', 'CycleEntry', 'QuotaReading', 'RunStop', 'State', 'Marker']);
const REQUIRED = new Set(['State.situation', 'HistoryEvent.kind', 'Marker.class', 'Marker.marker', 'Marker.match']);
const snake = (camel) => camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

test("index.d.ts declares every record and enum of jco's declarations of the WIT, field by field", () => {
  const dts = readFileSync(join(packageDir, 'index.d.ts'), 'utf8');
  const gen = readFileSync(join(packageDir, 'gen', 'interfaces', 'backstop-policy-types.d.ts'), 'utf8');
  let records = 0;
  for (const [, name, body] of gen.matchAll(/^export interface ([A-Za-z]+) \{\n([\s\S]*?)\n\}/gm)) {
    if (body.includes('tag: ')) continue; // a variant's case
    records += 1;
    const wit = body.split('\n').map((l) => l.trim().match(/^'?([A-Za-z0-9]+)'?(\??): (.*),$/));
    const lines = declaration(dts, name).split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('/'));
    const fields = lines.map((l) => l.match(/^([a-z0-9_]+)(\??): (.*);$/));
    assert.deepEqual(fields.map((f) => f && f[1]), wit.map((f) => snake(f[1])), name);
    wit.forEach(([, camel, witOptional, witType], i) => {
      const [, field, optional, type] = fields[i];
      const required = !INPUTS.has(name) || REQUIRED.has(`${name}.${field}`);
      assert.equal(optional === '', required, `${name}.${field} optional`);
      assert.equal(type.endsWith('| null'), witOptional === '?', `${name}.${field} nullable`);
      assert.equal(/^U64/.test(type), /Duration|Timestamp|bigint|BigUint64Array/.test(witType), `${name}.${field} u64`);
      assert.equal(/^number/.test(type), /^number/.test(witType) || /Array<number>/.test(witType), `${name}.${field} number`);
    });
  }
  assert.ok(records >= 27, `${records} records`);
  for (const [, name, cases] of gen.matchAll(/^export type ([A-Za-z]+) = ('[^;]*);$/gm)) {
    const body = declaration(dts, name);
    const declared = [...body.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]);
    assert.deepEqual(declared, [...cases.matchAll(/'([a-z-]+)'/g)].map((m) => m[1].replaceAll('-', '_')), name);
  }
});

test('the install usage of both READMEs runs as written', () => {
  const usage = readFileSync(join(here, 'install_usage.mjs'), 'utf8');
  for (const readme of [join(root, 'README.md'), join(packageDir, 'README.md')]) {
    assert.ok(readFileSync(readme, 'utf8').includes(usage), `${readme} must hold host-js/test/install_usage.mjs verbatim`);
  }
  const run = spawnSync(process.execPath, [join(here, 'install_usage.mjs')], { cwd: here, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), 'transient_transport retry');
});
