"""What backstop.celery adds to each failure of a Celery task, beside
Celery's own autoretry path (``autoretry_for`` + ``retry_backoff``), and
how many decisions per second the shared Redis state sustains.

Usage: python bench/celery_bench.py OUT_DIR   (writes OUT_DIR/celery.json)

Starts its own redis-server on 127.0.0.1 at a free port and stops it by
its pid. In-process, no worker: each path is the task's own code from the
raised exception to the retry (or stop) it decides, with ``task.retry``
replaced by one that builds Celery's ``Retry`` without publishing, since
publishing the retry message costs both paths the same (timed on its own
as ``publish``). Logging goes to /dev/null, as a worker writes its log.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "host-py"), os.path.join(ROOT, "host-py", "tests"), os.path.dirname(__file__)]

from python_call import per_call_ns  # noqa: E402
from redisproc import RedisServer  # noqa: E402

S = 1_000_000_000
ITEMS = 2000
THROUGHPUT_SECONDS = 5.0


def letters(n: int) -> str:
    """A word for n: failure messages that no signature folds together."""
    out = ""
    while True:
        n, r = divmod(n, 26)
        out = chr(97 + r) + out
        if n == 0:
            return out


class Response:
    status_code = 529
    headers = {"content-type": "application/json"}
    text = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


class HTTPStatusError(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.response = Response()


def build(redis_url: str):
    """The app and its tasks: Celery's autoretry task and Backstop's."""
    from celery import Celery
    from celery.exceptions import Retry

    from backstop.celery import BackstopTask

    app = Celery("bench", broker=f"{redis_url}/0")
    app.conf.backstop_redis_url = f"{redis_url}/2"
    counter = {"n": 0}

    @app.task(bind=True, autoretry_for=(HTTPStatusError,), retry_backoff=True, retry_backoff_max=600,
              retry_jitter=True, max_retries=None)
    def autoretry(self):
        raise HTTPStatusError("Server error '529 Overloaded'")

    class Task(BackstopTask):
        # The window's limit high enough that the throughput loop never blocks an item.
        backstop_config = {"window": {"limit": 1000}}

    @app.task(base=Task, bind=True)
    def transient(self, work_item):
        raise HTTPStatusError("Server error '529 Overloaded'")

    @app.task(base=Task, bind=True)
    def work(self, work_item):
        counter["n"] += 1
        raise AssertionError(f"check {letters(counter['n'])} failed")

    def no_publish(self, *args, exc=None, countdown=None, eta=None, **kwargs):
        return Retry(exc=exc, when=countdown if countdown is not None else eta)

    for t in (autoretry, transient, work):
        t.retry = no_publish.__get__(t)
    return app, autoretry, transient, work


def failing(task, *, item=None, seq=[0]):  # noqa: B006 - a counter for task ids
    """One failing run of `task` as a worker runs it: the request pushed, the task called."""
    from celery.exceptions import Retry

    from backstop.celery import BackstopTerminal

    seq[0] += 1
    kwargs = {} if item is None else {"work_item": item}
    task.push_request(id=f"{os.getpid()}-{seq[0]}", retries=0, headers={}, called_directly=False,
                      args=(), kwargs=kwargs)
    try:
        (task if item is not None else task.run)(**kwargs)
    except (Retry, BackstopTerminal) as e:
        return e
    finally:
        task.pop_request()
    raise AssertionError("the task did not fail")


def throughput_child(redis_url, seconds, index, queue):
    logging.basicConfig(stream=open(os.devnull, "w"), level=logging.INFO)
    _, _, _, work = build(redis_url)
    failing(work, item="warm-up")
    n, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        failing(work, item=f"item-{(index * 7919 + n) % ITEMS}")
        n += 1
    queue.put(n)


def throughput(redis_url, procs):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=throughput_child, args=(redis_url, THROUGHPUT_SECONDS, i, q)) for i in range(procs)]
    for p in ps:
        p.start()
    counts = [q.get(timeout=300) for _ in ps]
    for p in ps:
        p.join()
    return sum(counts) / THROUGHPUT_SECONDS, sum(counts)


def window_total(redis_url) -> int:
    import redis

    r = redis.Redis.from_url(f"{redis_url}/2")
    return sum(r.zcard(k) for k in r.scan_iter("backstop:*:window", count=1000))


def timings(redis_url) -> dict:
    """Median per-call times (ns) of each path and of its parts."""
    import backstop
    from celery.utils.time import get_exponential_backoff_interval

    from backstop.celery import Run

    _, autoretry, transient, work = build(redis_url)
    policy = work.backstop_policy
    exc = HTTPStatusError("Server error '529 Overloaded'")
    work_items = iter(range(10**9))
    for _ in range(3):  # warm up: the component compiled, the Lua scripts loaded
        failing(autoretry), failing(transient, item="transient"), failing(work, item="warm-up")
    t = {
        "celery_autoretry": per_call_ns(lambda: failing(autoretry))[0],
        "celery_backoff_only": per_call_ns(lambda: get_exponential_backoff_interval(1, 1, 600, True))[0],
        "backstop_transient": per_call_ns(lambda: failing(transient, item="transient"))[0],
        "backstop_work": per_call_ns(lambda: failing(work, item=f"item-{next(work_items) % ITEMS}"))[0],
        "refusal_check": per_call_ns(lambda: policy.refusal(Run(item="transient")))[0],
        "decide_transient": per_call_ns(lambda: policy.decide(exc, Run(item="transient", task_id="x")))[0],
        "publish": per_call_ns(lambda: autoretry.apply_async(countdown=3600))[0],
    }
    ev = {"text": "AssertionError: check x failed", "headers": []}
    now = int(time.time() * 1000)
    for i in range(policy.state.history_keep):  # a full history: as many events as are kept
        failing(work, item="full-history")
    st = policy.state.snapshot("full-history")
    state = {"now": now, "entropy": 1, "config": policy.config}
    calls = {
        "component_step_failed": {"step_failed": {"evidence": ev, "attempt": 1, "waited": 0}},
        "component_work_failed": {"work_failed": {"breaker": "celery", "actor": work.name,
                                                  "history": st.breaker_history()}},
        "component_task_failed": {"task_failed": {"failures": st.failures() or [now]}},
    }
    for name, situation in calls.items():
        t[name] = per_call_ns(lambda s=situation: backstop.Backstop.next_action(policy.engine, dict(state, situation=s)))[0]
    seq = iter(range(10**9))
    event = {"at": now, "kind": "failure", "breaker": "celery", "actor": "bench", "detail": "x"}
    t["redis_record"] = per_call_ns(lambda: policy.state.record_failure(
        f"lua-{next(seq) % ITEMS}", event, f"lua-{next(seq)}:0", window_ms=3600_000, window_keep=1000))[0]
    t["history_events"] = len(st.breaker_history())
    return t


def main():
    out = sys.argv[1]
    logging.basicConfig(stream=open(os.devnull, "w"), level=logging.INFO)
    server = RedisServer()
    try:
        import redis

        result = {"timings_ns": timings(server.url)}
        redis.Redis.from_url(f"{server.url}/2").flushdb()
        rates = {}
        for procs in (1, 2):
            redis.Redis.from_url(f"{server.url}/2").flushdb()
            rate, total = throughput(server.url, procs)
            recorded = window_total(server.url)
            if recorded != total + procs:  # each process also records one warm-up failure
                raise SystemExit(f"{procs} processes: {total + procs} failures decided, {recorded} recorded")
            rates[str(procs)] = {"decisions_per_s": rate, "decisions": total, "recorded": recorded}
        result["throughput"] = rates
    finally:
        server.stop()
    from importlib.metadata import version

    result.update({
        "runtime": f"Python {platform.python_version()}",
        "celery": version("celery"), "redis_py": version("redis"),
        "redis_server": RedisServer.version(),
        "items": ITEMS, "throughput_seconds": THROUGHPUT_SECONDS,
    })
    with open(os.path.join(out, "celery.json"), "w") as f:
        json.dump(result, f, indent=2)
    t = result["timings_ns"]
    print(f"celery autoretry {t['celery_autoretry'] / 1e3:.1f} us; backstop transient "
          f"{t['backstop_transient'] / 1e3:.1f} us, work {t['backstop_work'] / 1e3:.1f} us; publish "
          f"{t['publish'] / 1e3:.1f} us; decisions/s " +
          ", ".join(f"{k} proc {v['decisions_per_s']:.0f}" for k, v in result["throughput"].items()))


if __name__ == "__main__":
    main()
