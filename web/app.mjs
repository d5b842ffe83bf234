// The playground: wires the three panels to the component. The component and
// its JSON-shape wrapper are host-js/index.mjs and its jco output, copied into
// ./backstop by web/build.mjs.

import * as backstop from './backstop/index.mjs';
import { $, h } from './dom.mjs';
import { exampleText, fillExamples, FIRST_EXAMPLE, loadExamples, readEvidence, showClassification } from './classify-view.mjs';
import { computeSchedule, drawTimeline, listDecisions } from './schedule.mjs';
import { loadStory, runStory, showStory } from './breaker.mjs';

const SEC = 1e9;
/** Form inputs of `config.transport`: [input id, field, ns per unit]. */
const TRANSPORT_FIELDS = [
  ['max-attempts', 'max_attempts', 1],
  ['budget', 'budget', SEC],
  ['initial-delay', 'initial_delay', SEC],
  ['multiplier', 'multiplier', 1],
];
const state = { examples: new Map(), story: null, failures: 3 };

const mode = () => document.querySelector('input[name=mode]:checked').value;

function setMode(m) {
  document.querySelector(`input[name=mode][value=${m}]`).checked = true;
}

/** The editor's evidence, or null (the error is shown). */
function currentEvidence() {
  const err = $('evidence-error');
  try {
    const ev = readEvidence(mode(), $('evidence').value);
    err.hidden = true;
    return ev;
  } catch (e) {
    err.textContent = e.message;
    err.hidden = false;
    return null;
  }
}

function classifyNow() {
  const ev = currentEvidence();
  if (ev === null) return;
  try {
    showClassification(backstop.classify(ev));
  } catch (e) {
    $('evidence-error').textContent = e.message; // an InputError names the field
    $('evidence-error').hidden = false;
  }
}

/** Shows a refusal beside the schedule, marking the form input it names. */
function showConfigError(e) {
  const box = $('config-error');
  for (const input of document.querySelectorAll('#transport-form input')) input.removeAttribute('aria-invalid');
  if (!e) {
    box.hidden = true;
    return;
  }
  const field = e.field ?? e.path ?? null;
  const rule = e.rule ?? (field ? e.message.slice(field.length + 2) : e.message);
  const who = e.name === 'PolicyError' ? `Refused by the component: ${e.kind}` : e.name === 'InputError' ? 'Not a valid input' : 'Not valid';
  box.replaceChildren(h('b', {}, who), h('div', { class: 'msg' }, field ? [h('code', { class: 'field' }, field), `: ${rule}`] : rule));
  box.hidden = false;
  const named = field && TRANSPORT_FIELDS.find(([, f]) => field === `config.transport.${f}`);
  if (named) $(named[0]).setAttribute('aria-invalid', 'true');
}

/** The configuration JSON, or throws an Error saying why it is not one. */
function readConfig() {
  try {
    return JSON.parse($('config').value);
  } catch (e) {
    throw new Error(`the configuration is not valid JSON: ${e.message}`);
  }
}

/** The form's transport values written into the configuration JSON. */
function formToConfig() {
  let config;
  try {
    config = readConfig();
    config.transport ??= {};
    for (const [id, f, unit] of TRANSPORT_FIELDS) {
      const v = Number($(id).value);
      if ($(id).value.trim() === '' || !Number.isFinite(v)) {
        throw Object.assign(new Error('not a number'), { field: `config.transport.${f}`, rule: 'enter a number' });
      }
      config.transport[f] = Math.round(v * unit);
    }
  } catch (e) {
    showConfigError(e);
    return;
  }
  $('config').value = JSON.stringify(config, null, 2);
  recompute();
}

/** The configuration JSON's values shown in the form and the threshold input. */
function configToForm(config) {
  for (const [id, f, unit] of TRANSPORT_FIELDS) {
    const v = config?.transport?.[f];
    if (typeof v === 'number') $(id).value = String(v / unit);
  }
  const b = config?.breakers?.find?.((x) => x.kind === state.story?.breaker);
  if (b && typeof b.threshold === 'number') $('threshold').value = String(b.threshold);
}

function readEntropy() {
  const v = $('seed').value.trim();
  try {
    if (!/^(0x[0-9a-f]+|[0-9]+)$/i.test(v)) throw new Error();
    return BigInt(v);
  } catch {
    const rule = 'a decimal or 0x-hex unsigned integer';
    throw Object.assign(new Error(`entropy: ${rule}`), { name: 'InputError', path: 'entropy', rule });
  }
}

/** The schedule's evidence: the Classify panel's, plus the server hint when one is set. */
function scheduleEvidence() {
  const ev = currentEvidence();
  const ra = $('retry-after').value.trim();
  if (ev === null || ra === '') return ev;
  return { ...ev, headers: [...(Array.isArray(ev.headers) ? ev.headers : []), { name: 'retry-after', value: ra }] };
}

function clearOutputs(message) {
  $('timeline').replaceChildren(h('p', { class: 'placeholder' }, message));
  $('schedule-steps').replaceChildren();
}

function clearStory(message) {
  $('breaker-steps').replaceChildren(h('li', { class: 'placeholder' }, message));
  $('breaker-meter').replaceChildren();
  $('breaker-trip').hidden = true;
}

/** Recomputes the schedule and the breaker story from the configuration and the evidence. */
function recompute() {
  let config;
  try {
    config = readConfig();
    configToForm(config);
    const evidence = scheduleEvidence();
    const steps = evidence === null ? null : computeSchedule(backstop.nextAction, { config, evidence, entropy: readEntropy() });
    const transport = { ...backstop.defaultConfig().transport, ...config.transport };
    if (steps) {
      $('timeline').replaceChildren(drawTimeline(steps, transport));
      listDecisions($('schedule-steps'), steps);
    } else clearOutputs('No schedule: the evidence above does not parse.');
    showStory(runStory(backstop.nextAction, state.story, state.failures, config), backstop.signature);
    showConfigError(null);
  } catch (e) {
    showConfigError(e);
    clearOutputs('No schedule: the configuration is refused.');
    clearStory('No story: the configuration is refused (see the retry schedule above).');
  }
}

function pickExample(id) {
  const { mode: m, text } = exampleText(state.examples.get(id).input);
  setMode(m);
  $('evidence').value = text;
  classifyNow();
  recompute();
}

function switchMode() {
  const text = $('evidence').value;
  if (mode() === 'json') $('evidence').value = JSON.stringify({ text }, null, 2);
  else {
    try {
      const v = JSON.parse(text);
      if (typeof v?.text === 'string') $('evidence').value = v.text;
    } catch { /* keep the text as it is */ }
  }
  classifyNow();
  recompute();
}

function setThreshold() {
  try {
    const config = readConfig();
    const b = config.breakers?.find?.((x) => x.kind === state.story.breaker);
    if (b) b.threshold = Number($('threshold').value);
    $('config').value = JSON.stringify(config, null, 2);
  } catch (e) {
    showConfigError(e);
    return;
  }
  recompute();
}

function wire() {
  $('example').addEventListener('change', () => pickExample($('example').value));
  $('evidence').addEventListener('input', () => { classifyNow(); recompute(); });
  for (const r of document.querySelectorAll('input[name=mode]')) r.addEventListener('change', switchMode);
  for (const [id] of TRANSPORT_FIELDS) $(id).addEventListener('input', formToConfig);
  for (const id of ['retry-after', 'seed', 'config']) $(id).addEventListener('input', recompute);
  $('threshold').addEventListener('input', setThreshold);
  $('breaker-next').addEventListener('click', () => { state.failures = Math.min(state.failures + 1, 20); recompute(); });
  $('breaker-back').addEventListener('click', () => { state.failures = Math.max(state.failures - 1, 1); recompute(); });
  $('transport-form').addEventListener('submit', (e) => e.preventDefault());
}

async function main() {
  const info = backstop.info();
  $('info').textContent = `backstop:policy ${info.package_version} · record schema ${info.schema_version} · ${info.marker_count} markers`;
  const groups = await loadExamples();
  for (const g of groups) for (const c of g.cases) state.examples.set(c.id, c);
  fillExamples($('example'), groups);
  state.story = await loadStory();
  $('config').value = JSON.stringify(backstop.defaultConfig(), null, 2);
  wire();
  $('example').value = FIRST_EXAMPLE;
  pickExample(FIRST_EXAMPLE);
  document.body.dataset.ready = 'true';
}

main().catch((e) => {
  $('info').textContent = `failed to start: ${e.message}`;
  $('info').classList.add('error');
});
