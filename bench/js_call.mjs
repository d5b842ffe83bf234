// Times one `classify` call from JavaScript (host-js, the component
// transpiled by jco) on the 2 KiB evidence the Rust benchmark wrote, and
// writes the result as JSON.
//
// Usage: node bench/js_call.mjs OUT_DIR
// Reads OUT_DIR/evidence-2KiB.json, writes OUT_DIR/js.json.
//        node bench/js_call.mjs --serve OUT_DIR
// Prints `ready`, then for each line `N` on stdin runs N calls and prints the
// mean nanoseconds per call (bench/hosts_paired.py drives it).

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const BATCHES = 9;
const BATCH_SECONDS = 0.25;

const now = () => Number(process.hrtime.bigint());

/** Median over batches of the mean time of one call in a batch. */
function perCallNs(fn) {
  let n = 0;
  const start = now();
  while (now() - start < (BATCH_SECONDS * 1e9) / 4) {
    fn();
    n += 1;
  }
  n = Math.max(1, n * 4);
  const means = [];
  for (let b = 0; b < BATCHES; b++) {
    const t0 = now();
    for (let i = 0; i < n; i++) fn();
    means.push((now() - t0) / n);
  }
  means.sort((a, b) => a - b);
  return [means[Math.floor(BATCHES / 2)], n];
}

const serving = process.argv[2] === '--serve';
const out = process.argv[serving ? 3 : 2];
const evidence = JSON.parse(readFileSync(join(out, 'evidence-2KiB.json'), 'utf8'));

if (serving) {
  const backstop = await import('../host-js/index.mjs');
  if (backstop.classify(evidence).class !== 'transient_transport') throw new Error('js classify did not decide transient_transport');
  const { createInterface } = await import('node:readline');
  console.log('ready');
  for await (const line of createInterface({ input: process.stdin })) {
    const n = Number(line);
    const t0 = now();
    for (let i = 0; i < n; i++) backstop.classify(evidence);
    console.log((now() - t0) / Math.max(n, 1));
  }
  process.exit(0);
}

let t0 = now();
const backstop = await import('../host-js/index.mjs');
const importNs = now() - t0;
t0 = now();
const first = backstop.classify(evidence);
const firstCallNs = now() - t0;
if (first.class !== 'transient_transport') {
  throw new Error(`js classify decided ${first.class}, expected transient_transport`);
}
const [steadyNs, perBatch] = perCallNs(() => backstop.classify(evidence));
// The parts of that call: the wrapper's JSON.stringify and JSON.parse, and
// jco's generated function for `classify-json` (its glue and the component).
const { engine } = await import('../host-js/gen/backstop.js');
const text = JSON.stringify(evidence);
const answer = engine.classifyJson(text);
if (JSON.parse(answer).class !== first.class) throw new Error('the JSON function answers as the wrapper');
const [stringifyNs] = perCallNs(() => JSON.stringify(evidence));
const [jsonFunctionNs] = perCallNs(() => engine.classifyJson(text));
const [parseNs] = perCallNs(() => JSON.parse(answer));
const jco = JSON.parse(readFileSync(new URL('../host-js/node_modules/@bytecodealliance/jco/package.json', import.meta.url), 'utf8')).version;
const result = {
  host: 'js',
  runtime: `Node ${process.version}`,
  binding: `jco ${jco}`,
  call_2kib_ns: steadyNs,
  calls_per_batch: perBatch,
  batches: BATCHES,
  import_ns: importNs,
  first_call_ns: firstCallNs,
  stringify_ns: stringifyNs,
  json_function_ns: jsonFunctionNs,
  parse_ns: parseNs,
};
writeFileSync(join(out, 'js.json'), JSON.stringify(result, null, 2));
console.log(`js: 2 KiB classify ${(steadyNs / 1000).toFixed(1)} us/call (median of ${BATCHES} batches of ${perBatch})`);
