// The retry schedule: `next-action` asked step by step for one failing step,
// and drawn as a timeline of the time spent waiting on backoff.

import { h, human, s } from './dom.mjs';

/** The instant the schedule starts at (ms since the epoch); the waits move it on. */
export const START_MS = 1_790_000_000_000;

/**
 * Asks `nextAction` after attempt 1, 2, … of a step that fails with
 * `evidence`, adding each chosen delay to `waited`, until the decision is not
 * a retry. Returns `[{attempt, waited, decision}]`; throws what `nextAction` throws.
 */
export function computeSchedule(nextAction, { config, evidence, entropy }) {
  const steps = [];
  let waited = 0;
  for (let attempt = 1; attempt <= 1000; attempt++) {
    const decision = nextAction({
      now: START_MS + Math.ceil(waited / 1e6),
      entropy,
      config,
      situation: { step_failed: { evidence, attempt, waited } },
    });
    steps.push({ attempt, waited, decision });
    if (decision.action !== 'retry') break;
    waited += decision.delay;
  }
  return steps;
}

/**
 * The equal-jitter band `[base/2, base]` the backoff draws the delay after
 * `attempt` from (base = initial_delay × multiplier^(attempt−1)); drawn only,
 * the delay itself is the component's. Null when a server hint set the delay.
 */
export function jitterBand(transport, step) {
  if (step.decision.action !== 'retry' || step.decision.server_hint) return null;
  const base = BigInt(transport.initial_delay) * BigInt(transport.multiplier) ** BigInt(step.attempt - 1);
  return { lo: Number(base / 2n), hi: Number(base) };
}

/** The label of the last decision: where and why the schedule stops or hands over. */
export function stopLabel(decision) {
  const why = decision.reasoning.replace(/^stopped: /, '');
  const clause = why.split(/[:;]/)[0].trim();
  if (decision.action === 'resume') return `resume: hands over to the run level in ${human(decision.delay)}`;
  if (decision.action === 'terminal_budget_exhausted') return `terminal_budget_exhausted: ${clause}`;
  return `${decision.action} (${decision.class ?? 'no class'}): not retried`;
}

const S = 1e9;
const NICE = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400]
  .map((sec) => sec * S);

/** Tick spacing of about a sixth of `span`, a round duration. */
function tickStep(spanNs) {
  return NICE.find((t) => t >= spanNs / 7) ?? NICE[NICE.length - 1];
}

const W = 900;
const LEFT = 86;
const RIGHT = 24;
const TOP = 34;
const ROW = 36;
const AXIS = 36;

/** Draws the schedule as an SVG timeline. */
export function drawTimeline(steps, transport) {
  const last = steps[steps.length - 1];
  let end = transport.budget;
  for (const st of steps) if (st.decision.action === 'retry') end = Math.max(end, st.waited + st.decision.delay);
  end *= 1.04;
  const x = (ns) => LEFT + ((W - LEFT - RIGHT) * ns) / end;
  const height = TOP + steps.length * ROW + AXIS;
  const svg = s('svg', {
    viewBox: `0 0 ${W} ${height}`, role: 'img', class: 'schedule-svg',
    'aria-label': `retry schedule: ${steps.length} attempts, ${stopLabel(last.decision)}`,
  });
  svg.append(drawBudget(x, transport.budget, height, end));
  steps.forEach((st, i) => svg.append(drawRow(x, st, i, steps[i + 1], transport)));
  svg.append(drawAxis(x, end, height));
  return svg;
}

function drawBudget(x, budget, height, end) {
  const bx = x(budget);
  return s('g', { class: 'budget' },
    bx < x(end) - 1 ? s('rect', { x: bx, y: TOP - 8, width: x(end) - bx, height: height - AXIS - TOP + 8, class: 'over-budget' }) : null,
    s('line', { x1: bx, y1: TOP - 10, x2: bx, y2: height - AXIS, class: 'budget-line' }),
    s('text', { x: bx, y: TOP - 16, 'text-anchor': bx > W - 140 ? 'end' : 'middle', class: 'budget-label' },
      `wait budget ${human(budget)}`));
}

function drawRow(x, st, i, next, transport) {
  const y = TOP + i * ROW + ROW / 2;
  const d = st.decision;
  const g = s('g', { class: `row ${d.action}` });
  g.append(s('line', { x1: LEFT, y1: y, x2: W - RIGHT, y2: y, class: 'guide' }));
  g.append(s('text', { x: 8, y: y + 4, class: 'row-label' }, `attempt ${st.attempt}`));
  const band = jitterBand(transport, st);
  const clip = (ns) => Math.min(x(ns), W - RIGHT);
  if (band && clip(st.waited + band.lo) < W - RIGHT) {
    const [b0, b1] = [clip(st.waited + band.lo), clip(st.waited + band.hi)];
    g.append(s('rect', { x: b0, y: y - 9, width: Math.max(1, b1 - b0), height: 18, rx: 3, class: 'jitter-band' },
      s('title', {}, `jitter band [${human(band.lo)}, ${human(band.hi)}]`)));
  }
  if (d.action === 'retry') {
    const x2 = x(st.waited + d.delay);
    g.append(s('rect', { x: x(st.waited), y: y - 3, width: Math.max(1, x2 - x(st.waited)), height: 6, rx: 3, class: 'delay-bar' }));
    if (next) g.append(s('line', { x1: x2, y1: y + 3, x2, y2: y + ROW - 7, class: 'link' }));
    const label = `waits ${human(d.delay)}${delayNote(d, band)}`;
    const right = Math.max(x2, band ? clip(st.waited + band.hi) : 0) + 8;
    g.append(s('text', textAt(right, y, x(st.waited) - 10, label, 7.1), label));
  } else {
    const label = stopLabel(d);
    g.append(s('text', { ...textAt(x(st.waited) + 12, y, x(st.waited) - 12, label, 7.9), class: 'stop-label' }, label));
  }
  g.append(s('circle', { cx: x(st.waited), cy: y, r: 6.5, class: `attempt-mark ${d.action === 'retry' ? 'retry' : 'stop'}` },
    s('title', {}, `attempt ${st.attempt} failed after ${human(st.waited)} of waiting: ${d.action}`)));
  return g;
}

/** Where the chosen delay came from, as the label says it. */
function delayNote(d, band) {
  if (!band) return ' (server hint)';
  const range = `[${human(band.lo)}, ${human(band.hi)}]`;
  return d.reasoning.includes('clamped to the') ? `: the rest of the budget (drawn from ${range})` : ` of ${range}`;
}

/** Text right of `x`, or ending at `xLeft` when `label` (about `charW` a character) would run off the right edge. */
function textAt(x, y, xLeft, label, charW) {
  const fits = x + label.length * charW <= W - RIGHT;
  if (fits || xLeft - label.length * charW < 0) return { x, y: y + 4, class: 'note' };
  return { x: xLeft, y: y + 4, 'text-anchor': 'end', class: 'note' };
}

function drawAxis(x, end, height) {
  const y = height - AXIS + 6;
  const g = s('g', { class: 'axis' }, s('line', { x1: LEFT, y1: y, x2: W - RIGHT, y2: y }));
  const step = tickStep(end);
  for (let t = 0; t <= end; t += step) {
    g.append(s('line', { x1: x(t), y1: y, x2: x(t), y2: y + 5 }), s('text', { x: x(t), y: y + 18, 'text-anchor': 'middle' }, human(t)));
  }
  g.append(s('text', { x: 8, y: y + 18, class: 'axis-title' }, 'waited'));
  return g;
}

/** The decisions as a list under the timeline, the last with its full reasoning. */
export function listDecisions(ol, steps) {
  ol.replaceChildren(...steps.map((st, i) => {
    const d = st.decision;
    const what = d.action === 'retry' ? `retry after ${human(d.delay)}` : d.action;
    const li = h('li', { class: d.action === 'retry' ? 'retry' : 'stop' },
      h('b', {}, `attempt ${st.attempt} failed`), ` (waited ${human(st.waited)}) → `, h('code', {}, what));
    if (i === steps.length - 1) li.append(h('p', { class: 'reasoning' }, d.reasoning));
    return li;
  }));
}
