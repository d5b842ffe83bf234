"""Backstop inside Celery workers, with the breaker state shared in Redis.

Starts two redis-servers on 127.0.0.1 (the broker, and the shared state
that is killed in the last test) and two Celery worker processes (solo
pool, one consumer each: w1 on queues q1 and shared, w2 on q2 and shared),
then runs the scripted tasks of celery_app.py. The first tests need no
worker: the evidence, the state's Lua scripts, the configuration checks
and the operator CLI.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import types

import pytest
import redis

HERE = os.path.dirname(os.path.abspath(__file__))
HOST_PY = os.path.dirname(HERE)
sys.path[:0] = [HERE, HOST_PY]

import backstop  # noqa: E402
from backstop.celery import (  # noqa: E402
    BackstopBlocked, BackstopTerminal, FailurePolicy, Run, evidence_from_exception)
from backstop.redis_state import RedisState  # noqa: E402
from redisproc import RedisServer  # noqa: E402

S = 1_000_000_000
RESULT_TIMEOUT = 40


# ---------------------------------------------------------------------------
# Fixtures: the servers, the app, the workers.


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("celery")
    broker = RedisServer(logfile=str(d / "broker.log"))
    state = RedisServer(logfile=str(d / "state.log"))
    ns = types.SimpleNamespace(dir=str(d), broker=broker, state=state, state_url=f"{state.url}/0")
    os.environ.update(BACKSTOP_TEST_BROKER=broker.url, BACKSTOP_REDIS_URL=ns.state_url, BACKSTOP_TEST_DIR=str(d))
    yield ns
    state.stop()
    broker.stop()


@pytest.fixture(scope="module")
def capp(servers):
    return importlib.import_module("celery_app")


class Workers:
    """Celery worker processes, started and stopped by their own pids."""

    QUEUES = {"w1": "q1,shared", "w2": "q2,shared"}

    def __init__(self, servers, app):
        self.servers, self.app, self.procs = servers, app, {}
        self.host = None

    def start(self, name: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([HOST_PY, HERE]))
        log = open(os.path.join(self.servers.dir, f"{name}.log"), "ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "-c", "1", "--pool=solo",
             "-n", f"{name}@%h", "-Q", self.QUEUES[name], "-l", "info",
             "--without-gossip", "--without-mingle"],
            cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self, names, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            replies = self.app.app.control.ping(timeout=0.5) or []
            up = {h.split("@")[0] for r in replies for h in r}
            if set(names) <= up:
                self.host = next(iter(replies[0])).split("@", 1)[1]
                return
            for n in names:
                if self.procs[n].poll() is not None:
                    raise RuntimeError(f"worker {n} exited: see {self.servers.dir}/{n}.log")
        raise RuntimeError(f"workers {names} did not answer within {timeout}s")

    def revive(self) -> None:
        """Start again any worker that died (a test kills one)."""
        dead = [n for n, p in self.procs.items() if p.poll() is not None]
        for n in dead:
            self.start(n)
        if dead:
            self.wait_ready(list(self.QUEUES))

    def kill(self, name: str, sig=signal.SIGTERM) -> None:
        p = self.procs.get(name)
        if p is not None and p.poll() is None:
            os.kill(p.pid, sig)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()


@pytest.fixture(scope="module")
def all_workers(servers, capp):
    w = Workers(servers, capp)
    for name in Workers.QUEUES:
        w.start(name)
    try:
        w.wait_ready(list(Workers.QUEUES))
        yield w
    finally:
        for name in list(w.procs):
            w.kill(name)


@pytest.fixture
def workers(all_workers):
    all_workers.revive()
    return all_workers


def book(capp):
    return capp.book


def decisions(capp, item):
    return [json.loads(x) for x in capp.book.lrange(f"decisions:{item}", 0, -1)]


def runs(capp, item):
    return int(capp.book.get(f"runs:{item}") or 0)


def snapshot(servers, item):
    return RedisState(servers.state_url).snapshot(item)


def outcome_of(result):
    """The task's return value, or the exception it ended with."""
    return result.get(timeout=RESULT_TIMEOUT, propagate=False)


def cli(servers, *args):
    env = dict(os.environ, PYTHONPATH=HOST_PY)
    return subprocess.run([sys.executable, "-m", "backstop.celery", *args, "--redis", servers.state_url],
                          capture_output=True, text=True, env=env, timeout=60)


# ---------------------------------------------------------------------------
# Without workers: evidence, state, configuration, CLI.


def raised(exc):
    try:
        raise exc
    except Exception as e:  # noqa: BLE001 - the traceback is the point
        return e


class _Resp:
    def __init__(self, status_code=None, headers=None, text=None, status=None):
        if status_code is not None:
            self.status_code = status_code
        if status is not None:
            self.status = status
        self.headers = headers or {}
        if text is not None:
            self.text = text


class _Headers:
    """httpx.Headers' shape: repeated names come apart in multi_items()."""

    def __init__(self, pairs):
        self.pairs = pairs

    def multi_items(self):
        return list(self.pairs)

    def items(self):
        raise AssertionError("multi_items() must be preferred")


def test_evidence_requests_style_response():
    class HTTPError(Exception):
        pass

    e = HTTPError("503 Server Error: Service Unavailable for url: https://api.example/v1")
    e.response = _Resp(503, {"Retry-After": "7"}, json.dumps({"error": {"type": "api_error", "code": "busy"}}))
    ev = evidence_from_exception(raised(e))
    assert ev["http_status"] == 503
    assert ev["headers"] == [{"name": "Retry-After", "value": "7"}]
    assert ev["error_type"] == "api_error" and ev["error_code"] == "busy"
    first = ev["text"].splitlines()[0]
    assert first.endswith("HTTPError: 503 Server Error: Service Unavailable for url: https://api.example/v1")
    assert "Traceback (most recent call last)" in ev["text"] and "response body:" in ev["text"]
    assert backstop.classify(ev)["class"] == "transient_transport"


def test_evidence_httpx_style_headers_and_sdk_body():
    class APIStatusError(Exception):  # the Anthropic SDK's shape
        pass

    e = APIStatusError("Error code: 529")
    e.status_code = 529
    e.response = _Resp(None, _Headers([("x-should-retry", "true"), ("set-cookie", "a"), ("set-cookie", "b")]))
    e.body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    ev = evidence_from_exception(raised(e))
    assert ev["http_status"] == 529 and ev["error_type"] == "overloaded_error" and "error_code" not in ev
    assert [h["name"] for h in ev["headers"]] == ["x-should-retry", "set-cookie", "set-cookie"]


def test_evidence_openai_style_code_and_plain_exceptions():
    class RateLimitError(Exception):  # the OpenAI SDK's shape: .code and .type, the body is the error object
        pass

    e = RateLimitError("You exceeded your current quota")
    e.status_code, e.code, e.type = 429, "insufficient_quota", "insufficient_quota"
    e.body = {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}
    ev = evidence_from_exception(raised(e))
    assert ev["error_code"] == "insufficient_quota" and ev["http_status"] == 429
    assert backstop.classify(ev)["class"] == "environmental"
    plain = evidence_from_exception(raised(ValueError("bad")))
    assert plain["headers"] == [] and "http_status" not in plain
    assert plain["text"].startswith("ValueError: bad\n")
    urllib_like = raised(OSError("HTTP Error 502: Bad Gateway"))
    urllib_like.code, urllib_like.status = 502, 502  # urllib's HTTPError: an int .code is a status, not an error code
    ev = evidence_from_exception(urllib_like)
    assert ev["http_status"] == 502 and "error_code" not in ev


def test_state_concurrent_records_count_each_run_once(servers):
    st = RedisState(servers.state_url, prefix="unit", history_keep=1000)
    item = "concurrent"
    st.client.delete(*st.keys(item))
    now = int(time.time() * 1000)

    def worker(t):
        for i in range(50):
            ev = {"at": now, "kind": "failure", "breaker": "celery", "actor": "a", "detail": f"e {t} {i}"}
            st.record_failure(item, ev, f"task-{t}-{i}:0", window_ms=3600_000)
            st.record_failure(item, ev, f"task-{t}-{i}:0", window_ms=3600_000)  # delivered again

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = st.snapshot(item)
    assert len(snap.history) == 400
    assert len(snap.window) == 400 and len({run for run, _ in snap.window}) == 400
    history, window, _, seen = st.keys(item)
    assert all(0 < st.client.ttl(k) <= st.ttl_seconds for k in (history, window, seen))


def test_state_trims_history_and_window_and_keeps_manual_control(servers):
    st = RedisState(servers.state_url, prefix="unit", history_keep=5)
    item = "trim"
    st.client.delete(*st.keys(item))
    now = int(time.time() * 1000)
    st.control(item, {"at": now, "kind": "force_close", "breaker": "", "actor": "op"})
    for i in range(12):
        ev = {"at": now + i, "kind": "failure", "breaker": "celery", "actor": "a", "detail": "x"}
        snap = st.record_failure(item, ev, f"r{i}:0", window_ms=60_000, window_keep=3)
    assert len(snap.history) == 5 and len(snap.window) == 3
    assert [at for at in snap.failures()] == [now + 9, now + 10, now + 11]
    # The force-close was trimmed off the list but still leads the breaker's history.
    assert snap.manual["kind"] == "force_close" and snap.history[0]["kind"] == "failure"
    assert snap.breaker_history()[0]["kind"] == "force_close"
    later = {"at": now + 120_000, "kind": "failure", "breaker": "celery", "actor": "a", "detail": "x"}
    snap = st.record_failure(item, later, "later:0", window_ms=60_000)
    assert snap.window == [("later:0", now + 120_000)]  # the older failures left the window


def test_policy_refuses_bad_configuration_naming_the_field():
    with pytest.raises(backstop.PolicyError) as e:
        FailurePolicy({"transport": {"max_attempts": 11}})
    assert e.value.field == "config.transport.max_attempts"
    with pytest.raises(ValueError, match="backstop_breaker"):
        FailurePolicy(breaker="nope")
    with pytest.raises(ValueError, match="work item"):
        FailurePolicy().decide(raised(ValueError("x")), Run(item=""))


def test_policy_without_state_decides_from_the_failure_alone():
    policy = FailurePolicy()
    out = policy.decide(raised(AssertionError("tests failed")), Run(item="solo", task_id="t"))
    assert out.action == "stop" and out.decision["action"] == "terminal"
    assert "no breaker" in out.note and set(out.decisions) == {"step_failed"}


def test_policy_manual_controls_over_the_shared_history(servers):
    policy = FailurePolicy(redis_url=servers.state_url, actor="unit")
    st, item = policy.state, "manual-controls"
    st.client.delete(*st.keys(item))
    op = {"breaker": "", "actor": "ops"}

    def fail(n):
        return policy.decide(raised(AssertionError(f"tests failed: {n} of 40")), Run(item=item, task_id=f"t{n}"))

    st.control(item, {"at": int(time.time() * 1000), "kind": "force_open", **op})
    refused = policy.refusal(Run(item=item))
    assert refused.action == "refuse" and refused.decision["circuit_breaker"]["manual"] == "force-open"
    st.control(item, {"at": int(time.time() * 1000), "kind": "force_close", **op})
    assert policy.refusal(Run(item=item)) is None
    outs = [fail(n) for n in range(1, 3)]  # held closed: no trip at the threshold of 3
    assert [o.decisions["work_failed"]["action"] for o in outs] == ["proceed", "proceed"]
    out = fail(3)  # the window (limit 3) still counts
    assert out.action == "block" and out.decision["circuit_breaker"]["breaker"] == "window"
    assert out.decisions["work_failed"]["circuit_breaker"]["manual"] == "force-close"
    st.control(item, {"at": int(time.time() * 1000), "kind": "reset", **op})
    assert policy.refusal(Run(item=item)) is None
    assert fail(4).decisions["work_failed"]["attempt"] == 1  # the count restarted at the reset


def test_block_yields_to_an_operator_control_that_landed_meanwhile(servers):
    st, item = RedisState(servers.state_url), "block-race"
    st.client.delete(*st.keys(item))
    seen = st.snapshot(item)
    st.control(item, {"at": int(time.time() * 1000), "kind": "manual_unblock", "breaker": "", "actor": "ops"})
    assert st.block(item, {"at": 0, "by": "t:0", "record_json": "{}"}, seen) is False
    assert st.snapshot(item).blocked is None
    assert st.block(item, {"at": 0, "by": "t:0", "record_json": "{}"}, st.snapshot(item)) is True


def test_cli_controls_and_bad_input(servers):
    item = "cli-item"
    RedisState(servers.state_url).client.delete(*RedisState(servers.state_url).keys(item))
    r = cli(servers, "force-open", item, "--actor", "ops")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["manual"]["kind"] == "force_open" and out["manual"]["actor"] == "ops"
    assert json.loads(cli(servers, "inspect", item).stdout)["history"][-1]["kind"] == "force_open"
    r = cli(servers, "reset", item)
    assert r.returncode == 0 and [e["kind"] for e in json.loads(r.stdout)["history"]] == ["reset"]
    r = cli(servers, "inspect", "x" * 300)
    assert r.returncode == 2 and "work item: at most 256 bytes" in r.stderr
    r = subprocess.run([sys.executable, "-m", "backstop.celery", "inspect", item, "--redis", "redis://127.0.0.1:1/0"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=HOST_PY), timeout=60)
    assert r.returncode == 1 and "shared state unavailable" in r.stderr


# ---------------------------------------------------------------------------
# Two workers.


def test_transient_failure_retried_with_the_components_delays(servers, capp, workers):
    item = "flaky-529"
    assert outcome_of(capp.flaky.apply_async(kwargs={"work_item": item, "failures": 2}, queue="q1")) == 3
    ds = decisions(capp, item)
    assert [d["action"] for d in ds] == ["retry", "retry"]
    first, second = (d["situations"]["step_failed"] for d in ds)
    assert (first["attempt"], second["attempt"]) == (1, 2)  # the attempt travels in the retry's headers
    assert first["class"] == "transient_transport" and first["signal"] == "error-type overloaded_error"
    # initial_delay 1 s, multiplier 2, equal jitter: [0.5 s, 1 s], then [1 s, 2 s].
    assert S // 2 <= first["delay"] <= S and S <= second["delay"] <= 2 * S
    assert [d["countdown"] for d in ds] == [first["delay"] / S, second["delay"] / S]
    assert second["waited"] == first["delay"]
    assert snapshot(servers, item).history == []  # transport retries are not work-item failures


def test_transient_failure_stops_when_the_attempts_are_spent(servers, capp, workers):
    item = "flaky-exhausted"
    exc = outcome_of(capp.flaky.apply_async(kwargs={"work_item": item, "failures": 5}, queue="q2"))
    assert isinstance(exc, BackstopTerminal) and not isinstance(exc, BackstopBlocked)
    assert exc.record["action"] == "terminal_budget_exhausted" and exc.record["attempt"] == 3
    assert runs(capp, item) == 3
    assert len(snapshot(servers, item).window) == 1  # the stop counts once in the window


def test_work_failure_stopped_at_once(servers, capp, workers):
    item = "work-once"
    exc = outcome_of(capp.broken.apply_async(kwargs={"work_item": item, "message": "tests failed: 3 of 40"},
                                             queue="q1"))
    assert isinstance(exc, BackstopTerminal) and not isinstance(exc, BackstopBlocked)
    assert exc.record["action"] == "terminal" and exc.record["class"] == "work"
    assert runs(capp, item) == 1
    (d,) = decisions(capp, item)
    assert d["action"] == "stop" and d["situations"]["work_failed"]["attempt"] == 1
    assert "1 of 3 identical failures" in str(exc)


def test_identical_failures_on_two_workers_trip_the_shared_breaker_then_unblock(servers, capp, workers):
    item = "pr-1234"
    outcomes = []
    for queue, n in (("q1", 3), ("q2", 5), ("q1", 8)):  # numbers differ, the signature does not
        kwargs = {"work_item": item, "message": f"tests failed: {n} of 40"}
        outcomes.append(outcome_of(capp.broken.apply_async(kwargs=kwargs, queue=queue)))
    ds = decisions(capp, item)
    assert [d["hostname"].split("@")[0] for d in ds] == ["w1", "w2", "w1"]
    assert [type(o) for o in outcomes] == [BackstopTerminal, BackstopTerminal, BackstopBlocked]
    assert [d["situations"]["work_failed"]["attempt"] for d in ds] == [1, 2, 3]
    cb = outcomes[2].record["circuit_breaker"]
    assert (cb["breaker"], cb["count"], cb["threshold"]) == ("celery", 3, 3)
    unblock = f"python -m backstop.celery unblock {item} --redis {servers.state_url}"
    assert cb["unblock_commands"] == [unblock] and unblock in str(outcomes[2])

    # Blocked: a run that would succeed is refused on the other worker, its body never runs.
    before = runs(capp, item)
    refused = outcome_of(capp.flaky.apply_async(kwargs={"work_item": item, "failures": 0}, queue="q2"))
    assert isinstance(refused, BackstopBlocked) and "run refused" in str(refused) and unblock in str(refused)
    assert runs(capp, item) == before

    r = cli(servers, "unblock", item, "--actor", "ops")
    assert r.returncode == 0, r.stderr
    state = json.loads(r.stdout)
    assert state["blocked"] is None and state["history"][-1]["kind"] == "manual_unblock"
    assert outcome_of(capp.flaky.apply_async(kwargs={"work_item": item, "failures": 0}, queue="q2")) == before + 1
    again = outcome_of(capp.broken.apply_async(kwargs={"work_item": item, "message": "tests failed: 9 of 40"},
                                               queue="q1"))
    assert type(again) is BackstopTerminal and "1 of 3 identical failures" in str(again)


def test_window_limit_enforced_across_workers(servers, capp, workers):
    item = "loop-84"
    results = [capp.looping.apply_async(kwargs={"work_item": item}, queue=q) for q in ("q1", "q2")]
    outcomes = [outcome_of(r) for r in results]
    assert all(isinstance(o, BackstopBlocked) for o in outcomes)
    ds = decisions(capp, item)
    assert {d["hostname"].split("@")[0] for d in ds} == {"w1", "w2"}
    acted = [d for d in ds if d["action"] != "refuse"]
    assert [d["action"] for d in acted] == ["requeue", "requeue", "block"]
    assert sorted(d["countdown"] for d in acted[:2]) == [1.0, 2.0]  # base_delay 1 s x 2^(count-1)
    cb = acted[2]["record"]["circuit_breaker"]
    assert (cb["breaker"], cb["count"], cb["threshold"]) == ("window", 3, 3)
    assert [d["action"] for d in ds].count("refuse") == 1
    assert runs(capp, item) == 3 and len(snapshot(servers, item).window) == 3


def test_usage_limit_resumes_at_the_reset(servers, capp, workers):
    item = "usage-limit"
    eta = outcome_of(capp.limited.apply_async(kwargs={"work_item": item, "reset_in": 2}, queue="q2"))
    (d,) = decisions(capp, item)
    reset_ms = int(capp.book.get(f"reset:{item}")) * 1000
    assert d["action"] == "resume" and d["eta_ms"] == reset_ms  # reset_margin 0
    assert d["situations"]["step_failed"]["class"] == "usage_limit"
    assert d["record"]["run_auto_resumed"]["reason"] == "usage-limit-reset"
    from datetime import datetime
    assert int(datetime.fromisoformat(eta).timestamp() * 1000) == reset_ms


def test_worker_killed_after_recording_counts_the_redelivered_run_once(servers, capp, workers):
    item = "killed-mid-task"
    open(os.path.join(servers.dir, "kill-once"), "w").close()
    exc = outcome_of(capp.doomed.apply_async(kwargs={"work_item": item}, queue="shared"))
    assert runs(capp, item) == 2  # the body ran twice: the killed run and the redelivered one
    (d,) = decisions(capp, item)  # the killed run decided nothing
    assert "counted once" in d["note"] and d["retries"] == 0
    assert type(exc) is BackstopTerminal and "1 of 3 identical failures; 1 of 3 failures in the window" in str(exc)
    snap = snapshot(servers, item)
    assert [e["kind"] for e in snap.history] == ["failure"] and len(snap.window) == 1
    dead = [n for n, p in workers.procs.items() if p.poll() is not None]
    assert len(dead) == 1 and d["hostname"].split("@")[0] != dead[0]


def test_readme_example(servers, tmp_path):
    """The README's Celery example, as written: its own redis-server and worker."""
    ex = os.path.join(HERE, "celery_example")
    with open(os.path.join(HOST_PY, "..", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for name in ("tasks.py", "run.py"):
        with open(os.path.join(ex, name), encoding="utf-8") as f:
            assert f.read() in readme, f"README.md must contain host-py/tests/celery_example/{name} verbatim"
    server = RedisServer(logfile=str(tmp_path / "redis.log"))
    env = dict(os.environ, REDIS_URL=server.url, PYTHONPATH=os.pathsep.join([HOST_PY, ex]))
    env.pop("BACKSTOP_REDIS_URL")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "tasks", "worker", "-c", "1", "--pool=solo",
                               "-n", "example@%h"], cwd=ex, env=env, stdout=open(tmp_path / "worker.log", "wb"),
                              stderr=subprocess.STDOUT)
    try:
        out = subprocess.run([sys.executable, "run.py"], cwd=ex, env=env, capture_output=True, text=True, timeout=120)
    finally:
        os.kill(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        server.stop()
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [" ".join(line.split()[:2]) for line in lines] == [
        "BackstopTerminal terminal", "BackstopTerminal terminal", "BackstopBlocked block", "BackstopBlocked block"]
    assert "(2 of 3 identical failures" in lines[1] and "run refused" in lines[3]
    assert f"unblock with: python -m backstop.celery unblock pr-1234 --redis {server.url}/2" in lines[2]


def test_redis_killed_mid_run_decides_from_the_failure_alone(servers, capp, workers):
    item = "redis-fault"
    result = capp.gated.apply_async(kwargs={"work_item": item}, queue="q1")
    deadline = time.monotonic() + RESULT_TIMEOUT
    while runs(capp, item) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    servers.state.kill()  # mid-run: the task is waiting at its gate
    open(os.path.join(servers.dir, f"gate-{item}"), "w").close()
    exc = outcome_of(result)
    ds = decisions(capp, item)
    assert [d["action"] for d in ds] == ["retry", "stop"]
    assert type(exc) is BackstopTerminal and exc.record["class"] == "work"
    assert "shared state unavailable" in exc.note and "decided from the failure alone" in exc.note
    assert set(ds[1]["situations"]) == {"step_failed"}  # no breaker, no window
    # Not lost: a transient failure still gets its retry and the task completes.
    assert outcome_of(capp.flaky.apply_async(kwargs={"work_item": "after-fault", "failures": 1}, queue="q2")) == 2
