// Builds the playground into target/web: the page (this folder's index.html,
// *.mjs and style.css), host-js/index.mjs and its package.json (the one
// JSON-shape wrapper every JS host uses, copied, not rewritten) beside the
// component transpiled by jco
// into backstop/gen, and the vectors the page offers as examples.
//
// The component imports nothing, so jco's output needs no WASI shim; its
// loader fetches backstop.core.wasm next to it in a browser and reads the
// file in Node, so the same build also loads in the Node test.
//
// Usage: node web/build.mjs [OUT]   (OUT relative to the repository, default target/web)

import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const web = dirname(fileURLToPath(import.meta.url));
const root = resolve(web, '..');
const out = resolve(root, process.argv[2] ?? 'target/web');
const wasm = join(root, 'target', 'backstop.component.wasm');

// Vectors read by the page: classify examples and the breaker story.
const DATA = ['classify-seed.json', 'classify-real-threads.json', 'story-breaker.json'];

if (!existsSync(wasm)) {
  console.error(`${wasm} is missing: build the component first (cargo build -p backstop-host)`);
  process.exit(1);
}

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'backstop'), { recursive: true });
mkdirSync(join(out, 'data'), { recursive: true });

for (const name of readdirSync(web)) {
  if (name === 'index.html' || name === 'style.css' || (name.endsWith('.mjs') && name !== 'build.mjs' && name !== 'serve.mjs')) {
    cpSync(join(web, name), join(out, name));
  }
}
cpSync(join(root, 'host-js', 'index.mjs'), join(out, 'backstop', 'index.mjs'));
// The wrapper reads its version (the contract it supports) from its package.json.
cpSync(join(root, 'host-js', 'package.json'), join(out, 'backstop', 'package.json'));
for (const name of DATA) cpSync(join(root, 'tests', 'vectors', name), join(out, 'data', name));

const jco = join(web, 'node_modules', '.bin', 'jco');
execFileSync(jco, ['transpile', wasm, '--name', 'backstop', '-o', join(out, 'backstop', 'gen'), '--quiet'], {
  stdio: 'inherit',
});
console.log(`built ${out}`);
