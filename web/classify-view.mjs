// The Classify panel: examples from the shared vectors, evidence as text or
// JSON, and the component's classification with its deciding signal marked.

import { $, h } from './dom.mjs';

const EXAMPLE_FILES = [
  ['data/classify-seed.json', 'The seed incident and the classifier vectors'],
  ['data/classify-real-threads.json', 'Real failure texts from public issue threads'],
];
/** The example shown first: the seed 529 incident. */
export const FIRST_EXAMPLE = 'seed-incident-run';

/** Examples by group: `[{label, cases: [{id, description, input}]}]`, the seed incident first. */
export async function loadExamples() {
  const groups = [];
  for (const [url, label] of EXAMPLE_FILES) {
    const file = await (await fetch(url)).json();
    const cases = file.cases.filter((c) => c.input && typeof c.input === 'object');
    cases.sort((a, b) => (b.id === FIRST_EXAMPLE) - (a.id === FIRST_EXAMPLE));
    groups.push({ label, cases });
  }
  return groups;
}

/** Fills the example picker. */
export function fillExamples(select, groups) {
  for (const g of groups) {
    select.append(h('optgroup', { label: g.label }, g.cases.map((c) => h('option', { value: c.id }, c.description))));
  }
}

/** An example's input as the editor shows it: bare text, or evidence JSON. */
export function exampleText(input) {
  const keys = Object.keys(input);
  if (keys.length === 1 && keys[0] === 'text') return { mode: 'text', text: input.text };
  return { mode: 'json', text: JSON.stringify(input, null, 2) };
}

/** The evidence object of the editor's content; throws an Error saying what is wrong. */
export function readEvidence(mode, text) {
  if (mode === 'text') return { text };
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`the evidence is not valid JSON: ${e.message}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('the evidence JSON must be an object');
  return v;
}

/** Where `needle` (lower case, as the classifier reports it) occurs in `text`, ignoring ASCII case. */
export function findAll(text, needle) {
  if (!needle) return [];
  const lower = text.replace(/[A-Z]/g, (c) => c.toLowerCase()); // same length: indices carry over
  const out = [];
  for (let i = lower.indexOf(needle); i >= 0; i = lower.indexOf(needle, i + needle.length)) out.push(i);
  return out;
}

/** `text` in `pre`, each occurrence of `signal` in a <mark>; returns how many were marked. */
export function markSignal(pre, text, signal) {
  pre.replaceChildren();
  let at = 0;
  const hits = findAll(text, signal ?? '');
  for (const i of hits) {
    pre.append(text.slice(at, i), h('mark', { class: 'signal' }, text.slice(i, i + signal.length)));
    at = i + signal.length;
  }
  pre.append(text.slice(at));
  return hits.length;
}

const SOURCE = {
  marker: 'a marker in the text',
  error_code: 'the structured error type or code',
  http_status: 'the structured HTTP status',
  exit_code: 'the exit code (the text said nothing)',
  signal: 'the signal (the text said nothing)',
  header: "the server's headers",
  operator_marker: "an operator's marker",
  weighing: 'the words of the text, weighed (no marker decided)',
  none: 'nothing decided',
};

/** Shows a classification. */
export function showClassification(c) {
  const badge = $('class');
  badge.textContent = c.class;
  badge.className = `class-badge ${c.class}`;
  $('retryable').textContent = c.retryable ? 'retryable' : 'not retried';
  $('retryable').className = `pill ${c.retryable ? 'yes' : 'no'}`;
  $('signal').textContent = c.signal ?? '—';
  $('source').textContent = `from ${SOURCE[c.source] ?? c.source}`;
  $('reasoning').textContent = c.reasoning;
  const steps = [];
  if (c.failed_steps.length) steps.push(h('span', { class: 'failed' }, `failed: ${c.failed_steps.join(', ')}`));
  if (c.completed_steps.length) steps.push(h('span', { class: 'done' }, `completed: ${c.completed_steps.join(', ')}`));
  $('steps').replaceChildren(...(steps.length ? steps : ['none reported']));
  const pre = $('evidence-echo');
  const marked = markSignal(pre, c.evidence, c.signal);
  if (c.signal && marked === 0) {
    pre.append(h('span', { class: 'note' }, `\n(${c.signal}: decided by ${SOURCE[c.source] ?? c.source}, not by the text)`));
  }
  if (!c.evidence) pre.append(h('span', { class: 'note' }, '(no evidence text)'));
}
