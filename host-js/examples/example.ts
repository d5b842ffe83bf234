// The seed incident from TypeScript, typed by the package's declarations
// (index.d.ts). scripts/test-js type-checks it with `tsc --noEmit` in an empty
// project where the packed package is installed.
import { classify, nextAction, PolicyError, type Decision, type Evidence, type FailureClass, type State } from 'backstop';

const evidence: Evidence = {
  steps: [
    { id: 'workflow-design', status: 'completed' },
    {
      id: 'step-12-run-precommit',
      status: 'error',
      error: 'agent step failed: amplihack claude failed (exit 1)',
      stdout: 'API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.',
    },
  ],
};
const c = classify(evidence);
const cls: FailureClass = c.class;
console.log(cls, c.signal, c.failed_steps.join(','));

const state: State = {
  now: Date.now(),
  entropy: 42,
  config: { transport: { max_attempts: 5 } },
  situation: { step_failed: { evidence, attempt: 1, waited: 0 } },
};
try {
  const d: Decision = nextAction(state);
  if (d.action === 'retry' && d.delay !== null) console.log(`retry in ${Number(d.delay) / 1e9} s`);
} catch (e) {
  if (e instanceof PolicyError) console.error(`${e.field}: ${e.rule}`);
  else throw e;
}
