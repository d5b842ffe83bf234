import { classify } from 'backstop';

const evidence = {
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
console.log(c.class, c.signal); // transient_transport api error: 529
