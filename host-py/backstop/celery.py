"""Backstop inside Celery workers, with breaker state shared in Redis.

:class:`BackstopTask` is a Celery ``Task`` base class. When a task raises,
it turns the exception into evidence (:func:`evidence_from_exception`),
asks the component what to do and does it:

1. ``step_failed`` (the transport retry): ``retry`` becomes
   ``self.retry(countdown=...)`` with the decision's delay; a usage limit,
   or a server hint too long for the transport budget, is handed to
   ``run_stopped``, whose ``resume`` becomes ``self.retry(eta=resume_at)``.
2. Any other outcome stops the run, and the stop is a failure of the work
   item: it is appended to the item's history and window in Redis
   (:mod:`backstop.redis_state`, one Lua script per change, counted once
   per task id and attempt), then ``work_failed`` (the identical-failure
   breaker over the shared history) and ``task_failed`` (the windowed
   limit over the shared failure instants) are asked. A ``block`` marks
   the item blocked and raises :class:`BackstopBlocked`; later runs of the
   item are refused with the unblock commands until an operator runs
   ``python -m backstop.celery unblock ITEM --redis URL``. Otherwise the
   run stops with :class:`BackstopTerminal`, or, for a task with
   ``backstop_requeue = True``, is re-enqueued after the window's delay.

If Redis is unreachable, nothing is lost: the decision is made from the
failure alone (the transport retry, no breaker, no window) and the
exception and the log say so. Every decision is logged as
``backstop.failure_class {record_json}``.

Operator commands: ``python -m backstop.celery inspect|unblock|force-open|
force-close|reset ITEM --redis URL``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import getpass
import hashlib
import json
import logging
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import backstop
from backstop.redis_state import MANUAL_KINDS, ItemState, RedisState, StateError, check_item, redact_url

try:  # The policy, the evidence and the CLI work without Celery installed.
    from celery import Task as _CeleryTask
    from celery.exceptions import Ignore, Reject, Retry
except ImportError:  # pragma: no cover - exercised only without the extra
    _CeleryTask = object
    Ignore = Reject = Retry = ()

__all__ = [
    "BackstopBlocked",
    "BackstopTask",
    "BackstopTerminal",
    "FailurePolicy",
    "Outcome",
    "Run",
    "celery_config",
    "evidence_from_exception",
]

log = logging.getLogger("backstop.celery")

#: The breaker kind the Celery configuration adds and tasks count against.
BREAKER = "celery"
#: The unblock command; ``<work-item>`` and ``<redis-url>`` are filled per item.
UNBLOCK_COMMAND = "python -m backstop.celery unblock <work-item> --redis <redis-url>"
#: Headers a retried run carries: the transport attempt, the time waited, automatic resumes.
H_ATTEMPT, H_WAITED, H_RESUMES = "backstop_attempt", "backstop_waited", "backstop_resumes"


class BackstopTerminal(Exception):
    """The run stopped. ``args``: the message, the deciding decision's
    ``record_json`` and a note (``None``, or e.g. that the shared state was
    unreachable and the decision was made from the failure alone)."""

    def __init__(self, message: str, record_json: str = "", note: Optional[str] = None):
        super().__init__(message, record_json, note)
        self.message, self.record_json, self.note = message, record_json, note

    @property
    def record(self) -> dict:
        """The deciding decision record, parsed."""
        return json.loads(self.record_json) if self.record_json else {}

    def __str__(self) -> str:
        return self.message + (f" [{self.note}]" if self.note else "")


class BackstopBlocked(BackstopTerminal):
    """The work item is blocked (a breaker tripped, the window limit was
    reached, or an operator forced it open); the message names the unblock
    commands."""


# ---------------------------------------------------------------------------
# Evidence from an exception.

_MAX_MESSAGE = 2000
_MAX_BODY = 2000
_MAX_HEADERS = 256


def _exc_line(exc: BaseException) -> str:
    t = type(exc)
    name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    msg = str(exc)
    if len(msg) > _MAX_MESSAGE:
        msg = msg[:_MAX_MESSAGE] + "…"
    return f"{name}: {msg}" if msg else name


def _int_status(v: Any) -> Optional[int]:
    if isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 999:
        return v
    return None


def _status_of(exc: BaseException, resp: Any) -> Optional[int]:
    # SDK errors (.status_code), requests and httpx responses (.status_code),
    # urllib and aiohttp (.status), in that order.
    for obj, attr in ((exc, "status_code"), (resp, "status_code"), (resp, "status"), (exc, "status")):
        if obj is not None:
            status = _int_status(getattr(obj, attr, None))
            if status is not None:
                return status
    return None


def _headers_of(resp: Any, exc: BaseException) -> List[Dict[str, str]]:
    raw = getattr(resp, "headers", None) if resp is not None else None
    if raw is None:
        raw = getattr(exc, "headers", None)  # urllib.error.HTTPError
    if raw is None:
        return []
    try:
        if hasattr(raw, "multi_items"):  # httpx.Headers keeps repeated names apart
            items = raw.multi_items()
        elif hasattr(raw, "items"):
            items = raw.items()
        else:
            items = list(raw)
        out = []
        for name, value in items:
            out.append({"name": str(name), "value": str(value)})
            if len(out) >= _MAX_HEADERS:
                break
        return out
    except Exception:  # a foreign object that only looks like headers
        return []


def _body_of(exc: BaseException, resp: Any) -> Any:
    body = getattr(exc, "body", None)  # Anthropic / OpenAI SDKs: the parsed error body
    if body is not None:
        return body
    if resp is None:
        return None
    try:
        text = resp.text  # requests and httpx; httpx raises on an unread stream
    except Exception:
        return None
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _error_fields(exc: BaseException, body: Any) -> Dict[str, str]:
    out: Dict[str, str] = {}
    err = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    if isinstance(err, dict):
        if isinstance(err.get("type"), str) and err["type"] != "error":
            out["error_type"] = err["type"]
        if isinstance(err.get("code"), str):
            out["error_code"] = err["code"]
    for attr, key in (("type", "error_type"), ("code", "error_code")):
        v = getattr(exc, attr, None)  # the OpenAI SDK's APIError.type / .code
        if key not in out and isinstance(v, str) and v:
            out[key] = v
    return out


def evidence_from_exception(exc: BaseException, *, traceback_lines: int = 20) -> dict:
    """Evidence (the ``evidence`` record of ``wit/types.wit``) for an exception:
    its type and message first, then the tail of its traceback (chained
    causes included); where it carries an HTTP response (``requests`` and
    ``httpx`` errors' ``.response``, the Anthropic and OpenAI SDKs'
    ``.status_code``/``.response``/``.body``; duck-typed, none of these
    packages is needed) also the status, the error type and code and the
    response headers, and the response body's tail in the text."""
    resp = getattr(exc, "response", None)
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    text = _exc_line(exc) + "\n" + "\n".join(lines[-traceback_lines:])
    body = _body_of(exc, resp)
    if body is not None:
        body_text = body if isinstance(body, str) else json.dumps(body, default=str)
        text += "\nresponse body: " + body_text[-_MAX_BODY:]
    evidence: Dict[str, Any] = {"text": text, "headers": _headers_of(resp, exc)}
    status = _status_of(exc, resp)
    if status is not None:
        evidence["http_status"] = status
    evidence.update(_error_fields(exc, body))
    return evidence


def failure_detail(evidence: dict, limit: int = 4000) -> str:
    """The detail of a history event: the head of the evidence text, which
    leads with the exception line (the breaker's signature is the first
    meaningful line)."""
    return evidence.get("text", "")[:limit]


# ---------------------------------------------------------------------------
# Configuration.


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if k in base else v
        return out
    return over


def celery_config(overrides: Optional[dict] = None, engine: Optional[backstop.Backstop] = None) -> dict:
    """The component's defaults plus a ``celery`` breaker (3 identical
    failures) and unblock commands naming this module's CLI, with
    ``overrides`` merged in (records by field; a list replaces the list)."""
    engine = engine or _engine()
    cfg = engine.default_config()
    cfg["breakers"] = [b for b in cfg["breakers"] if b["kind"] != BREAKER] + [{
        "kind": BREAKER,
        "same_failure": "signature",
        "threshold": 3,
        "on_trip": "block",
        "reset_on": ["cycle_reset", "reclassified", "manual"],
        "look_at": "the worker log of the repeated failure (its traceback and backstop.failure_class lines); "
                   "the signature names its first meaningful line",
        "unblock_commands": [UNBLOCK_COMMAND],
    }]
    cfg["window"]["unblock_commands"] = [UNBLOCK_COMMAND]
    cfg["cycle"]["unblock_commands"] = [UNBLOCK_COMMAND]
    if overrides is not None:
        if not isinstance(overrides, dict):
            raise ValueError(f"backstop_config: expected a dict, got {type(overrides).__name__}")
        cfg = _merge(cfg, overrides)
    return cfg


def _fill(cfg: dict, item: str, url: str) -> dict:
    """``cfg`` with ``<work-item>`` and ``<redis-url>`` filled in its unblock commands."""
    def sub(cmds):
        return [c.replace("<work-item>", item).replace("<redis-url>", url) for c in cmds]

    out = dict(cfg)
    out["breakers"] = [dict(b, unblock_commands=sub(b.get("unblock_commands", []))) for b in cfg.get("breakers", [])]
    for part in ("window", "cycle"):
        if isinstance(cfg.get(part), dict) and "unblock_commands" in cfg[part]:
            out[part] = dict(cfg[part], unblock_commands=sub(cfg[part]["unblock_commands"]))
    return out


_engines: Dict[int, backstop.Backstop] = {}


def _engine() -> backstop.Backstop:
    """One component instance per process (a forked pool child makes its own),
    precompiled into ``$BACKSTOP_CACHE_DIR`` when that is set."""
    pid = os.getpid()
    if pid not in _engines:
        _engines[pid] = backstop.Backstop(cache_dir=os.environ.get("BACKSTOP_CACHE_DIR") or None)
    return _engines[pid]


def history_keep_for(config: dict) -> int:
    """How many history events to keep: the breaker reads back from the
    newest event until its count stops, at most its threshold of identical
    failures; four times the largest threshold leaves room for successes
    and other actors' events in between."""
    thresholds = [b.get("threshold", 3) for b in config.get("breakers", [])] or [3]
    return 4 * max(thresholds) + 16


# ---------------------------------------------------------------------------
# The decision path.


@dataclass
class Run:
    """One run of a task, as the policy sees it."""

    #: The work item whose failures are counted together.
    item: str
    #: The Celery task id.
    task_id: str = ""
    #: Celery's retry count of this message: with the task id, names the run.
    retries: int = 0
    #: The 1-based transport attempt of the step (reset on a resume or requeue).
    attempt: int = 1
    #: Nanoseconds already waited on transport backoff for the step.
    waited: int = 0
    #: Automatic resumes already made.
    resumes: int = 0

    @property
    def run_id(self) -> str:
        """What a failure is counted once by: the task id and its retry count."""
        return f"{self.task_id}:{self.retries}"


@dataclass
class Outcome:
    """What to do about a failed run, and why.

    ``action``: ``retry`` (after ``countdown`` s), ``resume`` (at ``eta_ms``),
    ``requeue`` (after ``countdown`` s, a windowed re-enqueue), ``stop``,
    ``block``, or ``refuse`` (the item was blocked before the run).
    ``decision`` is the deciding decision; ``decisions`` every decision
    asked on the way, by situation; ``headers`` what the next run carries.
    """

    action: str
    decision: dict
    decisions: Dict[str, dict] = field(default_factory=dict)
    countdown: Optional[float] = None
    eta_ms: Optional[int] = None
    headers: Dict[str, int] = field(default_factory=dict)
    note: Optional[str] = None

    @property
    def record_json(self) -> str:
        return self.decision.get("record_json") or json.dumps(self.decision, separators=(",", ":"))

    def message(self, item: str) -> str:
        reasoning = self.decision.get("reasoning", "")
        if self.action == "refuse":
            return f"backstop: work item {item!r} is blocked, run refused: {reasoning}"
        if self.action == "block":
            return f"backstop: work item {item!r} blocked: {reasoning}"
        counts = []
        d2, d3 = self.decisions.get("work_failed"), self.decisions.get("task_failed")
        if d2 is not None:
            counts.append(f"{d2['attempt']} of {d2['max_attempts']} identical failures")
        if d3 is not None:
            counts.append(f"{d3['attempt']} of {d3['max_attempts']} failures in the window")
        return f"backstop: {item}: {reasoning}" + (f" ({'; '.join(counts)})" if counts else "")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FailurePolicy:
    """The decision path of :class:`BackstopTask`, usable without Celery.

    ``config`` is merged over :func:`celery_config`; ``redis_url`` (or a
    ready ``state``) is where the shared state lives, none for none (the
    breaker and the window are then not consulted, and the records say
    so); failures count against breaker ``breaker`` as actor ``actor``;
    ``requeue`` re-enqueues a stopped run after the window's delay instead
    of stopping it.
    """

    def __init__(self, config: Optional[dict] = None, *, redis_url: Optional[str] = None,
                 state: Optional[RedisState] = None, breaker: str = BREAKER, actor: str = "celery",
                 requeue: bool = False, prefix: str = "backstop", engine: Optional[backstop.Backstop] = None):
        self.engine = engine or _engine()
        self.config = celery_config(config, self.engine)
        kinds = [b.get("kind") for b in self.config.get("breakers", [])]
        if breaker not in kinds:
            raise ValueError(f"backstop_breaker: {breaker!r} is not a configured breaker kind ({', '.join(map(str, kinds))})")
        if not isinstance(requeue, bool):
            raise ValueError(f"backstop_requeue: expected a boolean, got {requeue!r}")
        if state is None and redis_url:
            state = RedisState(redis_url, prefix=prefix, history_keep=history_keep_for(self.config))
        self.state = state
        self.breaker, self.actor, self.requeue = breaker, actor, requeue
        self.pid = os.getpid()
        self._url = redact_url(state.url) if state is not None else "<redis-url>"
        # Refuse a bad configuration now, naming the field, not at the first failure.
        self._ask(self.config, _now_ms(), {"task_failed": {"failures": [_now_ms()]}})

    def _ask(self, config: dict, now: int, situation: dict) -> dict:
        return self.engine.next_action({"now": now, "entropy": random.getrandbits(64),
                                        "config": config, "situation": situation})

    def decide(self, exc: BaseException, run: Run, now: Optional[int] = None) -> Outcome:
        """What to do about ``exc``, raised by ``run``."""
        now = _now_ms() if now is None else now
        config = _fill(self.config, check_item(run.item), self._url)
        evidence = evidence_from_exception(exc)
        d1 = self._ask(config, now, {"step_failed": {
            "evidence": evidence, "attempt": max(1, min(run.attempt, 1000)), "waited": run.waited}})
        decisions = {"step_failed": d1}
        if d1["action"] == "retry":
            return Outcome("retry", d1, decisions, countdown=d1["delay"] / 1e9, headers={
                H_ATTEMPT: run.attempt + 1, H_WAITED: run.waited + d1["delay"], H_RESUMES: run.resumes})
        stop = d1
        if d1["action"] == "resume" or d1.get("class") == "usage_limit":
            code = "USAGE_LIMIT_REACHED" if d1.get("class") == "usage_limit" else "RATE_LIMITED"
            d = self._ask(config, now, {"run_stopped": {
                "code": code, "resumes_done": run.resumes, "evidence": evidence}})
            decisions["run_stopped"] = d
            if d["action"] == "resume":
                return Outcome("resume", d, decisions, eta_ms=d["resume_at"], headers={
                    H_ATTEMPT: 1, H_WAITED: 0, H_RESUMES: run.resumes + 1})
            stop = d
        return self._stopped(evidence, stop, decisions, run, config, now)

    def _stopped(self, evidence: dict, stop: dict, decisions: Dict[str, dict], run: Run,
                 config: dict, now: int) -> Outcome:
        """The run stops: count it as a failure of the work item, then ask the
        breaker and the window."""
        if self.state is None:
            return Outcome("stop", stop, decisions, note="no shared state configured: decided from the "
                           "failure alone (transport retry, no breaker, no window)")
        event = {"at": now, "kind": "failure", "breaker": self.breaker, "actor": self.actor,
                 "detail": failure_detail(evidence)}
        window = config["window"]
        try:
            st = self.state.record_failure(run.item, event, run.run_id, window_ms=window["window"] // 1_000_000,
                                           window_keep=window["limit"])
        except StateError as e:
            return Outcome("stop", stop, decisions,
                           note=f"{e}; decided from the failure alone (transport retry, no breaker, no window)")
        note = None if st.new else f"run {run.run_id} was already counted (delivered again): counted once"
        decisions["work_failed"] = self._ask(config, now, {"work_failed": {
            "breaker": self.breaker, "actor": self.actor, "history": st.breaker_history()}})
        failures = st.failures()
        if failures:
            decisions["task_failed"] = self._ask(config, now, {"task_failed": {"failures": failures}})
        for d in (decisions["work_failed"], decisions.get("task_failed")):
            if d is not None and d["action"] == "block":
                return Outcome("block", d, decisions, note=self._mark_blocked(run, st, d, now, note))
        d3 = decisions.get("task_failed")
        if self.requeue and d3 is not None and d3.get("delay"):
            return Outcome("requeue", d3, decisions, countdown=d3["delay"] / 1e9, note=note, headers={
                H_ATTEMPT: 1, H_WAITED: 0, H_RESUMES: run.resumes})
        return Outcome("stop", stop, decisions, note=note)

    def _mark_blocked(self, run: Run, st: ItemState, d: dict, now: int, note: Optional[str]) -> Optional[str]:
        blocked = {"at": now, "by": run.run_id, "record_json": d["record_json"]}
        try:
            if not self.state.block(run.item, blocked, st):
                return "an operator's control landed meanwhile: the item was not marked blocked"
        except StateError as e:
            return f"{e}; the block was decided but could not be stored"
        return note

    def refusal(self, run: Run) -> Optional[Outcome]:
        """Before a run: ``refuse`` when the item is blocked or forced open,
        else None (also when the shared state is unreachable: the run goes
        ahead, and the failure, if any, is decided alone)."""
        if self.state is None:
            return None
        try:
            st = self.state.snapshot(run.item)
        except StateError as e:
            log.warning("backstop: %s: %s; running without the blocked check", run.item, e)
            return None
        if st.blocked is not None:
            rj = st.blocked["record_json"]
            return Outcome("refuse", dict(json.loads(rj), record_json=rj), note=f"blocked by run {st.blocked['by']}")
        if st.manual is not None and st.manual.get("kind") == "force_open":
            config = _fill(self.config, run.item, self._url)
            d = self._ask(config, _now_ms(), {"work_failed": {
                "breaker": self.breaker, "actor": self.actor, "history": st.breaker_history()}})
            if d["action"] == "block":
                return Outcome("refuse", d, {"work_failed": d}, note="forced open by an operator")
        return None

    def succeeded(self, run: Run) -> None:
        """After a successful run: a success event stops the breaker's count."""
        if self.state is None:
            return
        try:
            self.state.record_success(run.item, {"at": _now_ms(), "kind": "success", "breaker": self.breaker,
                                                 "actor": self.actor})
        except StateError as e:
            log.warning("backstop: %s: %s; the success was not recorded", run.item, e)


# ---------------------------------------------------------------------------
# The Celery task class.


class BackstopTask(_CeleryTask):
    """A Celery ``Task`` base whose failures Backstop decides.

    Use it as ``@app.task(base=BackstopTask, bind=True)``, or subclass it
    to set the ``backstop_*`` attributes:

    - ``backstop_config``: a partial configuration merged over
      :func:`celery_config` (durations in ns), e.g.
      ``{"transport": {"initial_delay": 1_000_000_000}}``;
    - ``backstop_redis_url``: where the shared state lives; else the app's
      ``backstop_redis_url`` setting, else ``$BACKSTOP_REDIS_URL``; with none
      the breaker and the window are off (each stop says so);
    - ``backstop_breaker`` (default ``celery``), ``backstop_prefix`` (the
      Redis key prefix), ``backstop_requeue`` (re-enqueue a stopped run
      after the window's delay instead of stopping it);
    - :meth:`backstop_work_item`: which work item a run belongs to.

    ``max_retries`` is ``None``: Backstop's bounds decide. Called directly
    (not by a worker), a task runs as a plain function.
    """

    max_retries = None
    backstop_config: Optional[dict] = None
    backstop_redis_url: Optional[str] = None
    backstop_breaker: str = BREAKER
    backstop_prefix: str = "backstop"
    backstop_requeue: bool = False

    def backstop_work_item(self, args: tuple, kwargs: dict) -> str:
        """The work item of a run: the ``work_item`` keyword argument when
        given, else the task name and a digest of its arguments."""
        if "work_item" in kwargs:
            return str(kwargs["work_item"])
        digest = hashlib.sha256(json.dumps([list(args), kwargs], sort_keys=True, default=repr).encode()).hexdigest()
        return f"{self.name}:{digest[:16]}"

    def on_backstop_decision(self, item: str, outcome: Outcome) -> None:
        """Called with every outcome before it is acted on (metrics, tests)."""

    @property
    def backstop_policy(self) -> FailurePolicy:
        policy = self.__dict__.get("_backstop_policy")
        if policy is None or policy.pid != os.getpid():
            url = (self.backstop_redis_url or self.app.conf.get("backstop_redis_url")
                   or os.environ.get("BACKSTOP_REDIS_URL"))
            policy = FailurePolicy(self.backstop_config, redis_url=url, breaker=self.backstop_breaker,
                                   actor=self.name, requeue=self.backstop_requeue, prefix=self.backstop_prefix)
            self.__dict__["_backstop_policy"] = policy
        return policy

    def _backstop_run(self, args: tuple, kwargs: dict) -> Run:
        req = self.request
        headers = getattr(req, "headers", None) or {}

        def h(name: str, default: int) -> int:
            v = headers.get(name, getattr(req, name, None))
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default

        return Run(item=check_item(self.backstop_work_item(args, kwargs)), task_id=req.id or "",
                   retries=req.retries or 0, attempt=h(H_ATTEMPT, 1), waited=h(H_WAITED, 0),
                   resumes=h(H_RESUMES, 0))

    def __call__(self, *args, **kwargs):
        if self.request.called_directly:
            return super().__call__(*args, **kwargs)
        # In a worker the tracer has pushed the request: run the body directly.
        run = self._backstop_run(args, kwargs)
        policy = self.backstop_policy
        refused = policy.refusal(run)
        if refused is not None:
            self._backstop_act(refused, None, run)
        try:
            result = self.run(*args, **kwargs)
        except (Retry, Ignore, Reject, BackstopTerminal):
            raise
        except Exception as exc:
            self._backstop_act(policy.decide(exc, run), exc, run)
            raise  # not reached: _backstop_act always raises
        policy.succeeded(run)
        return result

    def _backstop_act(self, outcome: Outcome, exc: Optional[BaseException], run: Run):
        """Log the outcome, then do it; always raises."""
        for d in list(outcome.decisions.values()) or [outcome.decision]:
            log.warning("backstop.failure_class %s", d.get("record_json") or outcome.record_json)
        summary = (f"backstop: item={run.item} task={self.name}[{run.task_id}] attempt={run.attempt} "
                   f"-> {outcome.action}")
        if outcome.countdown is not None:
            summary += f" in {outcome.countdown:.3f}s"
        if outcome.eta_ms is not None:
            summary += f" at {_dt.datetime.fromtimestamp(outcome.eta_ms / 1000, _dt.timezone.utc).isoformat()}"
        log.warning(summary + (f" ({outcome.note})" if outcome.note else ""))
        self.on_backstop_decision(run.item, outcome)
        headers = {**(getattr(self.request, "headers", None) or {}), **outcome.headers}
        if outcome.action in ("retry", "requeue"):
            raise self.retry(exc=exc, countdown=outcome.countdown, headers=headers)
        if outcome.action == "resume":
            eta = _dt.datetime.fromtimestamp(outcome.eta_ms / 1000, _dt.timezone.utc)
            raise self.retry(exc=exc, eta=eta, headers=headers)
        cls = BackstopBlocked if outcome.action in ("block", "refuse") else BackstopTerminal
        raise cls(outcome.message(run.item), outcome.record_json, outcome.note) from exc


# ---------------------------------------------------------------------------
# The operator's command line.

_COMMANDS = {"unblock": "manual_unblock", "force-open": "force_open", "force-close": "force_close", "reset": "reset"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m backstop.celery",
        description="Inspect or control a work item's shared Backstop state in Redis.")
    p.add_argument("command", choices=["inspect", *_COMMANDS],
                   help="inspect: print the state; unblock: end a block (and a force-open), restart the "
                        "breaker's count and the window; force-open: block the item until force-close, "
                        "reset or unblock; force-close: hold the breaker closed; reset: clear all state")
    p.add_argument("item", help="the work item")
    p.add_argument("--redis", required=True, metavar="URL", help="the shared state's Redis, e.g. redis://127.0.0.1:6379/0")
    p.add_argument("--prefix", default="backstop", help="the key prefix the tasks use (default: backstop)")
    p.add_argument("--breaker", default="", help="the breaker kind the control applies to (default: every breaker)")
    p.add_argument("--actor", default=None, help="who acts (default: the login name)")
    return p


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "operator"


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        state = RedisState(args.redis, prefix=args.prefix)
        check_item(args.item)
        if args.command == "inspect":
            st = state.snapshot(args.item)
        else:
            st = state.control(args.item, {"at": _now_ms(), "kind": _COMMANDS[args.command],
                                           "breaker": args.breaker, "actor": args.actor or _login()})
    except ValueError as e:
        print(f"backstop.celery: {e}", file=sys.stderr)
        return 2
    except StateError as e:
        print(f"backstop.celery: {e}", file=sys.stderr)
        return 1
    print(json.dumps(st.to_dict(), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
