import { classify, nextAction } from 'backstop';

const evidence = { steps: [{ id: 'step-12', status: 'error', stdout: 'API Error: 529 Overloaded' }] };
const state = { now: 1_790_000_000_000, entropy: 42, situation: { step_failed: { attempt: 1, evidence } } };
console.log(classify(evidence).class, nextAction(state).action); // transient_transport retry
