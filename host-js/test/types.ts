// Type errors the declarations must catch: each `@ts-expect-error` fails
// `tsc` (scripts/test-js) if the line below it type-checks, so declarations
// that were `any` or too loose would fail the build.
import { classify, defaultConfig, info, nextAction, signature, type FailureClass, type Situation } from 'backstop';

// @ts-expect-error: `situation` is required.
nextAction({ now: 1 });
// @ts-expect-error: not a failure class.
const notAClass: FailureClass = 'transient';
// @ts-expect-error: keys are snake_case.
classify({}).failedSteps;
// @ts-expect-error: `attempt` is a number.
nextAction({ situation: { step_failed: { attempt: '1' } } });
// @ts-expect-error: not a situation.
const notASituation: Situation = { step_fail: {} };
// @ts-expect-error: a config field that does not exist.
nextAction({ config: { transport: { max_attempt: 5 } }, situation: { cycle_entered: { name: 'x', count: 1 } } });
// @ts-expect-error: the detail is a string.
signature(42);

// And what must type-check.
const d = nextAction({ now: '1790000000000', entropy: 42n, situation: { task_failed: { failures: [1, '2', 3n] } } });
const delay: number | string | null = d.delay;
const attempts: number = defaultConfig().transport.max_attempts;
const schemaVersion: number = info().schema_version;
export { notAClass, notASituation, delay, attempts, schemaVersion };
