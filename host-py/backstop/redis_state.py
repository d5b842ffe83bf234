"""Backstop's per-work-item state, shared by every worker through Redis.

What the breakers and the windowed limit need, per work item:

- ``history``: the item's history events (JSON objects in the shape of
  ``history-event`` in ``wit/types.wit``), oldest first, in a list trimmed
  to the newest ``history_keep`` events (``LTRIM``);
- ``window``: the instants (ms) of the item's task failures, a sorted set
  whose members are the failures' run ids (task id and attempt), pruned
  to the window and to the limit;
- ``state``: a hash with ``blocked`` (the decision that blocked the item,
  as ``{"at", "record_json", "by"}``) and ``manual`` (the last manual
  control event, kept even when the history is trimmed past it);
- ``seen``: the run ids already recorded, so a run delivered again (a
  worker killed under ``acks_late``) counts once.

Every change is one Lua script (``register_script``): concurrent workers
never lose or double-count an event. Every key is set to expire
(``ttl_seconds``, refreshed on each change). Keys share the hash tag
``{item}``, so a cluster keeps one item's keys on one node.

Only the ``redis`` package is needed here; the Celery task class lives in
``backstop.celery``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit, urlunsplit

import redis

__all__ = ["ItemState", "RedisState", "StateError", "MANUAL_KINDS", "redact_url"]

#: The manual controls, as history event kinds (``event-kind`` in the WIT).
MANUAL_KINDS = ("manual_unblock", "force_open", "force_close", "reset")

#: Longest work item name, in bytes.
MAX_ITEM_BYTES = 256

_TRIM = """
local function trim(keep)
  redis.call('LTRIM', KEYS[1], -keep, -1)
end
local function touch(ttl)
  for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
end
local function snapshot()
  return {redis.call('LRANGE', KEYS[1], 0, -1),
          redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'),
          redis.call('HGETALL', KEYS[3])}
end
"""

# KEYS: history, window, state, seen.
# ARGV: event json, run id, at (ms), window cutoff (ms, exclusive), window
# keep, history keep, ttl (s), seen keep.
_RECORD = _TRIM + """
local new = 0
if redis.call('ZSCORE', KEYS[4], ARGV[2]) == false then
  new = 1
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -(tonumber(ARGV[8]) + 1))
  redis.call('RPUSH', KEYS[1], ARGV[1])
  trim(tonumber(ARGV[6]))
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[5]) + 1))
touch(tonumber(ARGV[7]))
local s = snapshot()
table.insert(s, 1, new)
return s
"""

# KEYS: history, window, state, seen. ARGV: op, event json, history keep, ttl (s).
_CONTROL = _TRIM + """
local op = ARGV[1]
if op == 'reset' then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HDEL', KEYS[3], 'blocked')
elseif op == 'manual_unblock' then
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[3], 'blocked')
elseif op == 'force_close' then
  redis.call('HDEL', KEYS[3], 'blocked')
end
redis.call('RPUSH', KEYS[1], ARGV[2])
trim(tonumber(ARGV[3]))
redis.call('HSET', KEYS[3], 'manual', ARGV[2])
touch(tonumber(ARGV[4]))
return snapshot()
"""

# KEYS: history, window, state, seen. ARGV: event json, history keep, ttl (s).
# A success matters only to a count already started: no history, no event.
_SUCCESS = _TRIM + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  trim(tonumber(ARGV[2]))
  touch(tonumber(ARGV[3]))
  return 1
end
return 0
"""

# KEYS: history, window, state, seen. ARGV: blocked json, the manual event
# the decision saw ('' for none), ttl (s). An operator's control that landed
# after the snapshot the decision was made from wins: no block then.
_BLOCK = _TRIM + """
local manual = redis.call('HGET', KEYS[3], 'manual') or ''
if manual ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[3], 'blocked', ARGV[1])
touch(tonumber(ARGV[3]))
return 1
"""

_SNAPSHOT = _TRIM + "return snapshot()"


class StateError(Exception):
    """The shared state is unreachable or answered wrongly; wraps the Redis error."""


def redact_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


@dataclass
class ItemState:
    """One work item's shared state, as read in one atomic step."""

    item: str
    history: List[dict] = field(default_factory=list)
    #: ``(run id, at ms)`` of the failures in the window, oldest first.
    window: List[tuple] = field(default_factory=list)
    blocked: Optional[dict] = None
    manual: Optional[dict] = None
    manual_raw: str = ""
    #: For a recorded failure: False when the run id had been recorded before.
    new: bool = True

    def breaker_history(self) -> List[dict]:
        """The history to pass to ``work_failed``: the stored tail, led by the
        last manual control when the trim has dropped it (it is older than
        every event of the tail, so the order holds)."""
        if self.manual is not None and self.manual not in self.history:
            return [self.manual] + self.history
        return list(self.history)

    def failures(self) -> List[int]:
        """The instants to pass to ``task_failed``."""
        return [at for _, at in self.window]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "item": self.item,
            "blocked": self.blocked,
            "manual": self.manual,
            "history": self.history,
            "window": [{"run": run, "at": at} for run, at in self.window],
        }


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _parse(item: str, raw: list) -> ItemState:
    hist, window, flat = raw
    state = dict(zip(map(_text, flat[0::2]), map(_text, flat[1::2])))
    pairs = [(_text(window[i]), int(float(_text(window[i + 1])))) for i in range(0, len(window), 2)]
    manual_raw = state.get("manual", "")
    return ItemState(
        item=item,
        history=[json.loads(_text(e)) for e in hist],
        window=pairs,
        blocked=json.loads(state["blocked"]) if state.get("blocked") else None,
        manual=json.loads(manual_raw) if manual_raw else None,
        manual_raw=manual_raw,
    )


def _dumps(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), sort_keys=True)


def check_item(item: Any) -> str:
    """The work item name, checked: a non-empty string of at most 256 bytes."""
    if not isinstance(item, str) or not item:
        raise ValueError(f"work item: expected a non-empty string, got {item!r}")
    if len(item.encode("utf-8")) > MAX_ITEM_BYTES:
        raise ValueError(f"work item: at most {MAX_ITEM_BYTES} bytes, got {len(item.encode('utf-8'))}")
    return item


class RedisState:
    """The shared state of work items in one Redis database.

    ``history_keep`` bounds each item's history (the breaker reads back from
    the newest event only until its count stops); ``window_keep`` bounds the
    failures kept in the window (at most the limit is ever needed);
    ``ttl_seconds`` is how long an item's keys live after their last change.
    The client's socket timeouts are short so that a Redis outage costs a
    failing task about a second, not a hang.
    """

    def __init__(self, url: str, *, prefix: str = "backstop", history_keep: int = 64,
                 window_keep: int = 1000, seen_keep: int = 1024, ttl_seconds: int = 7 * 24 * 3600,
                 socket_timeout: float = 1.0, client: Optional[redis.Redis] = None):
        for name, v, lo in (("history_keep", history_keep, 1), ("window_keep", window_keep, 1),
                            ("seen_keep", seen_keep, 1), ("ttl_seconds", ttl_seconds, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: expected an integer of at least {lo}, got {v!r}")
        self.url = url
        self.prefix = prefix
        self.history_keep = history_keep
        self.window_keep = window_keep
        self.seen_keep = seen_keep
        self.ttl_seconds = ttl_seconds
        self.client = client or redis.Redis.from_url(
            url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout,
            retry_on_timeout=False)
        self._record = self.client.register_script(_RECORD)
        self._control = self.client.register_script(_CONTROL)
        self._success = self.client.register_script(_SUCCESS)
        self._block = self.client.register_script(_BLOCK)
        self._snapshot = self.client.register_script(_SNAPSHOT)

    def keys(self, item: str) -> List[str]:
        """history, window, state, seen: the item's keys, with one hash tag."""
        base = f"{self.prefix}:{{{check_item(item)}}}"
        return [f"{base}:history", f"{base}:window", f"{base}:state", f"{base}:seen"]

    def _run(self, script, item: str, args: list):
        try:
            return script(keys=self.keys(item), args=args)
        except redis.RedisError as e:
            raise StateError(f"shared state unavailable at {redact_url(self.url)}: "
                             f"{type(e).__name__}: {e}") from e

    def record_failure(self, item: str, event: dict, run_id: str, *, window_ms: int,
                       window_keep: Optional[int] = None) -> ItemState:
        """Append a failure event and its instant to the window, once per
        ``run_id``; returns the state after it, read in the same step."""
        at = int(event["at"])
        keep = min(window_keep or self.window_keep, self.window_keep)
        raw = self._run(self._record, item, [
            _dumps(event), run_id, at, at - int(window_ms), keep, self.history_keep,
            self.ttl_seconds, self.seen_keep])
        state = _parse(item, raw[1:])
        state.new = bool(int(raw[0]))
        return state

    def record_success(self, item: str, event: dict) -> bool:
        """Append a success event when the item has a history; True when appended."""
        return bool(self._run(self._success, item, [_dumps(event), self.history_keep, self.ttl_seconds]))

    def control(self, item: str, event: dict) -> ItemState:
        """Apply a manual control (``event["kind"]`` one of :data:`MANUAL_KINDS`):
        ``manual_unblock`` clears the block and the window, ``force_close``
        clears the block, ``reset`` clears the history, the window and the
        block; each is appended to the history as the event it is."""
        kind = event.get("kind")
        if kind not in MANUAL_KINDS:
            raise ValueError(f"kind: expected one of {', '.join(MANUAL_KINDS)}, got {kind!r}")
        return _parse(item, self._run(self._control, item, [kind, _dumps(event), self.history_keep,
                                                            self.ttl_seconds]))

    def block(self, item: str, blocked: dict, seen: ItemState) -> bool:
        """Mark the item blocked with ``blocked`` unless an operator's manual
        control landed after ``seen`` was read; True when marked."""
        return bool(self._run(self._block, item, [_dumps(blocked), seen.manual_raw, self.ttl_seconds]))

    def snapshot(self, item: str) -> ItemState:
        """The item's state, read in one step."""
        return _parse(item, self._run(self._snapshot, item, []))
