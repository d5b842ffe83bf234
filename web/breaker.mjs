// The breaker story: the build breaker's story vector (identical AddressSanitizer
// crashes whose pids, addresses and lines differ), asked after each failure.

import { $, h, human } from './dom.mjs';

const STORY = 'story-breaker-build-trips-at-3';
const GAP_MS = 60_000;

/** The story's failures (the history of its last step) and its breaker and actor. */
export async function loadStory() {
  const file = await (await fetch('data/story-breaker.json')).json();
  const story = file.cases.find((c) => c.id === STORY);
  const wf = story.steps[story.steps.length - 1].input.situation.work_failed;
  return { breaker: wf.breaker, actor: wf.actor, failures: wf.history, description: story.description };
}

/** The first `n` failures; past the story's own, its last failure repeats a minute apart. */
export function history(story, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const k = Math.min(i, story.failures.length - 1);
    const extra = i - k;
    out.push({ ...story.failures[k], at: story.failures[k].at + extra * GAP_MS });
  }
  return out;
}

/** `next-action` after each of the first `n` failures: `[{event, decision}]`; throws what it throws. */
export function runStory(nextAction, story, n, config) {
  const all = history(story, n);
  return all.map((event, i) => ({
    event,
    decision: nextAction({
      now: event.at + 1000,
      entropy: 0,
      config,
      situation: { work_failed: { breaker: story.breaker, actor: story.actor, history: all.slice(0, i + 1) } },
    }),
  }));
}

/** The first line of a detail that names the fault, as written (pid and addresses included). */
function faultLine(detail) {
  return detail.split('\n').find((l) => /error/i.test(l)) ?? detail.split('\n')[0];
}

/** Shows the steps, the count meter and, once tripped, the block with its unblock text. */
export function showStory(steps, signature) {
  const t0 = steps[0].event.at;
  $('breaker-steps').replaceChildren(...steps.map(({ event, decision: d }, i) => h('li', { class: d.action === 'block' ? 'stop' : 'retry' },
    h('b', {}, `failure ${i + 1}`), ` at +${human((event.at - t0) * 1e6)}: `,
    h('code', { class: 'raw' }, faultLine(event.detail)),
    h('div', { class: 'sig' }, 'signature ', h('code', {}, signature(event.detail))),
    h('div', {}, '→ ', h('code', {}, d.action), ` count ${d.attempt} of ${d.max_attempts}`))));
  const last = steps[steps.length - 1].decision;
  const meter = $('breaker-meter');
  meter.replaceChildren(...Array.from({ length: last.max_attempts }, (_, i) => h('span', { class: i < last.attempt ? 'on' : 'off' })),
    h('span', { class: 'meter-text' }, ` count ${last.attempt} / threshold ${last.max_attempts}`));
  const trip = $('breaker-trip');
  const cb = last.circuit_breaker;
  trip.hidden = !cb;
  if (!cb) return;
  trip.replaceChildren(
    h('h3', {}, `Blocked: the ${cb.breaker} breaker tripped (${cb.count} identical failures, threshold ${cb.threshold})`),
    h('p', {}, 'Repeated signature: ', h('code', {}, cb.signature)),
    h('p', {}, 'Look at: ', cb.look_at),
    h('p', {}, 'Unblock with: ', ...cb.unblock_commands.map((c) => h('code', { class: 'cmd' }, c))),
    h('p', { class: 'reasoning' }, last.reasoning));
}
