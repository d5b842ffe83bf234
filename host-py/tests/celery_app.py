"""The Celery app the Celery tests run in worker processes.

Scripted failing tasks on BackstopTask. Settings come from the environment
the test sets: BACKSTOP_TEST_BROKER (broker, results in db 1, bookkeeping
in db 2), BACKSTOP_REDIS_URL (the shared state), BACKSTOP_TEST_DIR (gate
and kill flag files). Each decision is appended to the bookkeeping list
``decisions:<item>`` so the test can read what was decided and where.
"""

from __future__ import annotations

import json
import os
import signal
import time

import redis
from celery import Celery

from backstop.celery import BackstopTask

BROKER = os.environ["BACKSTOP_TEST_BROKER"]
TEST_DIR = os.environ["BACKSTOP_TEST_DIR"]

app = Celery("celery_app", broker=f"{BROKER}/0", backend=f"{BROKER}/1")
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    result_extended=True,
    broker_connection_retry_on_startup=True,
    # A killed worker's unacknowledged message comes back after 6 s (checked every second).
    broker_transport_options={"visibility_timeout": 6, "unacked_restore_interval": 1,
                              "unacked_restore_throttle": 1},
    task_default_queue="shared",
)
book = redis.Redis.from_url(f"{BROKER}/2")

S = 1_000_000_000  # one second in ns
CONFIG = {
    "transport": {"max_attempts": 3, "initial_delay": 1 * S, "multiplier": 2, "budget": 10 * S},
    "window": {"window": 60 * S, "limit": 3, "base_delay": 1 * S, "max_delay": 2 * S},
    "resume": {"max_resumes": 1, "reset_margin": 0},
}
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


class Response:
    """A duck-typed HTTP response, as requests and httpx errors carry."""

    def __init__(self, status_code: int, headers: dict, body: dict):
        self.status_code = status_code
        self.headers = headers
        self.text = json.dumps(body)


class HTTPStatusError(Exception):
    def __init__(self, message: str, response: Response):
        super().__init__(message)
        self.response = response


def overloaded() -> HTTPStatusError:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return HTTPStatusError("Server error '529 Overloaded'", Response(529, {"content-type": "application/json"}, body))


class ScriptedTask(BackstopTask):
    backstop_config = CONFIG

    def on_backstop_decision(self, item, outcome):
        book.rpush(f"decisions:{item}", json.dumps({
            "action": outcome.action, "countdown": outcome.countdown, "eta_ms": outcome.eta_ms,
            "note": outcome.note, "record": json.loads(outcome.record_json),
            "situations": {k: json.loads(d["record_json"]) for k, d in outcome.decisions.items()},
            "hostname": self.request.hostname, "retries": self.request.retries}))


class RequeueTask(ScriptedTask):
    backstop_requeue = True


class KillOnceTask(ScriptedTask):
    """Kills its own worker (SIGKILL) right after the failure is recorded,
    once: as if the worker died between the record and the acknowledgement."""

    @property
    def backstop_policy(self):
        policy = super().backstop_policy
        state = policy.state
        if not getattr(state, "_kill_wrapped", False):
            record = state.record_failure

            def record_then_die(*args, **kwargs):
                out = record(*args, **kwargs)
                flag = os.path.join(TEST_DIR, "kill-once")
                if os.path.exists(flag):
                    os.unlink(flag)
                    os.kill(os.getpid(), signal.SIGKILL)
                return out

            state.record_failure = record_then_die
            state._kill_wrapped = True
        return policy


def _run_count(item: str) -> int:
    return int(book.incr(f"runs:{item}"))


@app.task(base=ScriptedTask, bind=True)
def flaky(self, work_item, failures):
    """Fails with an HTTP 529 `failures` times, then returns the run count."""
    n = _run_count(work_item)
    if n <= failures:
        raise overloaded()
    return n


@app.task(base=ScriptedTask, bind=True)
def broken(self, work_item, message):
    """Always fails with a test failure (class work)."""
    _run_count(work_item)
    raise AssertionError(message)


@app.task(base=RequeueTask, bind=True)
def looping(self, work_item):
    """A task loop: fails each run with a different check, re-enqueued by the window."""
    n = _run_count(work_item)
    raise AssertionError(f"check {WORDS[(n - 1) % len(WORDS)]} failed")


@app.task(base=ScriptedTask, bind=True)
def limited(self, work_item, reset_in):
    """First run: a usage limit that resets `reset_in` s from now; then returns its own eta."""
    n = _run_count(work_item)
    if n == 1:
        reset = int(time.time()) + reset_in
        book.set(f"reset:{work_item}", reset)
        headers = {"anthropic-ratelimit-unified-status": "rejected",
                   "anthropic-ratelimit-unified-reset": str(reset)}
        body = {"type": "error", "error": {"type": "rate_limit_error", "message": "usage limit reached"}}
        raise HTTPStatusError("usage limit reached", Response(429, headers, body))
    return self.request.eta


@app.task(base=ScriptedTask, bind=True)
def gated(self, work_item):
    """First run waits for the gate file, then fails with a 529; later runs fail with a test failure."""
    n = _run_count(work_item)
    if n == 1:
        gate = os.path.join(TEST_DIR, f"gate-{work_item}")
        deadline = time.monotonic() + 30
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        raise overloaded()
    raise AssertionError("tests failed: 2 of 40")


@app.task(base=KillOnceTask, bind=True)
def doomed(self, work_item):
    """Always fails with a test failure; the first failure kills the worker after it is recorded."""
    _run_count(work_item)
    raise AssertionError("tests failed: 7 of 40")
