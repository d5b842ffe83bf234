"""Backstop for Python: the Backstop WebAssembly component, run by wasmtime.

The component imports nothing, so it is instantiated with an empty
``Linker``: no WASI, no capabilities. One compiled component and one live
instance are reused across calls; a call that traps (for example on a
limit) discards the instance and the next call starts a fresh one.

Values are plain dicts in the JSON shape of the vectors and the CLI:
snake_case keys, snake_case enum values, the variant ``situation`` as
``{"step_failed": {...}}``, durations in nanoseconds and timestamps in
milliseconds as ``int`` (a u64 may also be given as a decimal string).
This package converts nothing itself: it writes a value as JSON
(``orjson``) and calls the component's JSON functions (``classify-json``,
``next-action-json``, ...), which read it with the core's own model
(``src/model.rs``) and write the answer as JSON, read back with
``orjson``. The rules (defaults for left-out fields, unknown keys,
required fields) are the component's and are documented in
``wit/policy.wit``; a value that breaks them is refused naming its path.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import json
import math
import os
import re
import threading
import time
import tomllib
import weakref
from pathlib import Path
from typing import Any, Dict, Optional, Tuple


import ctypes

import orjson
from wasmtime import Config as _EngineConfig
from wasmtime import Engine, Store, WasmtimeError
from wasmtime import _ffi
from wasmtime import component as wc
from wasmtime.component._enter import enter_wasm as _enter_wasm

__all__ = [
    "Backstop",
    "BackstopError",
    "ContractError",
    "InputError",
    "LimitError",
    "PolicyError",
    "TrapError",
    "classify",
    "classify_with",
    "component_path",
    "default_config",
    "info",
    "next_action",
    "check_contract",
    "signature",
    "supports_contract",
]

#: The engine interface is exported as ``backstop:policy/engine@<contract version>``.
ENGINE_INTERFACE_PREFIX = "backstop:policy/engine@"

#: Per-call limits. The default bound is wall-clock time (wasmtime's epoch
#: interruption); fuel, an exact count of work, is there when asked for.
DEFAULT_TIMEOUT = 10.0
DEFAULT_MEMORY_BYTES = 256 << 20
#: The Rust host's default fuel budget (``backstop_host::Limits``), for callers
#: who want the same exact bound: ``Backstop(fuel=DEFAULT_FUEL)``.
DEFAULT_FUEL = 10_000_000_000
#: How often the epoch advances while a call runs: the granularity of ``timeout``.
EPOCH_TICK = 0.01

#: The functions this package calls; a component without them is refused.
_FUNCTIONS = ("classify-json", "classify-with-json", "next-action-json", "signature",
              "default-config-json", "info-json")
#: Those of them that take strings and return ``result<string, string>``:
#: the calls of every decision, made through :class:`_TextCall`.
_TEXT_FUNCTIONS = ("classify-json", "classify-with-json", "next-action-json")


class BackstopError(Exception):
    """Any error raised by this package."""


class PolicyError(BackstopError):
    """The component refused a value: ``kind`` is ``invalid_config`` or
    ``invalid_input``; ``field`` (the value's JSON path) and ``rule`` name
    what broke which rule."""

    def __init__(self, kind: str, field: str, rule: str):
        super().__init__(f"{kind.replace('_', ' ')}: {field}: {rule}")
        self.kind = kind
        self.field = field
        self.rule = rule

    def to_dict(self) -> Dict[str, Dict[str, str]]:
        """The error in the JSON shape: ``{"invalid_config": {"field": ..., "rule": ...}}``."""
        return {self.kind: {"field": self.field, "rule": self.rule}}


class InputError(PolicyError, ValueError):
    """An ``invalid_input`` :class:`PolicyError`: the evidence or state (not the
    configuration) breaks a rule, its shape (an unknown key, a wrong type, a
    value out of range) or the policy's (attempt 0); ``path`` is ``field``."""

    def __init__(self, path: str, rule: str):
        super().__init__("invalid_input", path, rule)
        self.path = path


class LimitError(BackstopError):
    """A call ran out of a per-call limit; ``limit`` is ``"time"`` (``value``
    in seconds), ``"fuel"`` or ``"memory"`` (bytes)."""

    def __init__(self, limit: str, value: Any, message: str):
        super().__init__(message)
        self.limit = limit
        self.value = value


class TrapError(BackstopError):
    """The component trapped for another reason."""


class ContractError(BackstopError):
    """The component speaks a contract version this package does not support."""

    def __init__(self, component_version: str, host_version: str):
        super().__init__(
            f"the component's contract version {component_version} is not supported by the "
            f"backstop Python package {host_version} (it supports {_supported_range(host_version)})")
        self.component_version = component_version
        self.host_version = host_version


def _own_version() -> str:
    """This package's version. Built, it is the wheel's (which the build takes
    from the crate's Cargo.toml); in a source checkout, Cargo.toml itself."""
    here = Path(__file__).resolve().parent
    if (here.parent / "pyproject.toml").is_file() and (here.parent.parent / "Cargo.toml").is_file():
        with open(here.parent.parent / "Cargo.toml", "rb") as f:
            return tomllib.load(f)["package"]["version"]
    return importlib.metadata.version("backstop")


__version__ = _own_version()


def _version_key(version: str) -> Optional[Tuple[int, int, int]]:
    m = re.fullmatch(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)", version)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def _supported_range(host_version: str) -> str:
    major, minor, patch = _version_key(host_version) or (0, 0, 0)
    if major == 0:
        return f"{major}.{minor}.{patch} up to, not including, {major}.{minor + 1}.0"
    return f"{major}.{minor}.0 up to, not including, {major + 1}.0.0"


def supports_contract(component_version: str, host_version: Optional[str] = None) -> bool:
    """Whether this package works with a component of ``component_version``
    (its ``info()["package_version"]``). The rule of docs/versioning.md:
    before 1.0 the major and minor must match and the component's patch be
    at least the package's (a 0.y.Z may add functions, which this package
    calls); from 1.0 the major must match and the component's minor be at
    least the package's."""
    c, h = _version_key(component_version), _version_key(host_version or __version__)
    if c is None or h is None:
        return False
    if h[0] == 0:
        return c[:2] == h[:2] and c[2] >= h[2]
    return c[0] == h[0] and c[1] >= h[1]


def check_contract(info: dict) -> None:
    """Raises :class:`ContractError` unless this package supports the contract
    version of a component, read from its ``info()``."""
    version = info.get("package_version") if isinstance(info, dict) else None
    if not isinstance(version, str) or not supports_contract(version, __version__):
        raise ContractError(str(version), __version__)


def component_path() -> Any:
    """Where the component is read from: ``$BACKSTOP_COMPONENT``, else the
    ``backstop.component.wasm`` bundled in this package (the wheel carries
    it), else, in a source checkout, the workspace's
    ``target/backstop.component.wasm``."""
    env = os.environ.get("BACKSTOP_COMPONENT")
    if env:
        return Path(env)
    bundled = importlib.resources.files(__name__).joinpath("backstop.component.wasm")
    if bundled.is_file():
        return bundled
    return Path(__file__).resolve().parent.parent.parent / "target" / "backstop.component.wasm"


# ---------------------------------------------------------------------------


class _Ticker:
    """Advances an engine's epoch every ``EPOCH_TICK`` seconds while at least
    one call runs (a daemon thread that sleeps otherwise), so that a store's
    epoch deadline bounds a call's wall-clock time. wasmtime-py releases the
    GIL while wasm runs, so the thread ticks during a call."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._reset()
        _tickers.add(self)

    def _reset(self) -> None:
        """No thread and no call: a forked child (a Celery worker) inherits
        the ticker but not its thread, and starts its own on its first call."""
        self._cond = threading.Condition()
        self._active = 0
        self._thread: Optional[threading.Thread] = None

    def enter(self) -> None:
        with self._cond:
            self._active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="backstop-epoch", daemon=True)
                self._thread.start()
            self._cond.notify()

    def leave(self) -> None:
        with self._cond:
            self._active -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._active == 0:
                    self._cond.wait()
            time.sleep(EPOCH_TICK)
            self._engine.increment_epoch()


_tickers: "weakref.WeakSet[_Ticker]" = weakref.WeakSet()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: [t._reset() for t in list(_tickers)])


def _ticks(timeout: float) -> int:
    """Epoch ticks for a deadline `timeout` seconds away: a tick may come at
    once, so one more than the timeout holds."""
    return max(1, math.ceil(timeout / EPOCH_TICK)) + 1


_compiled_cache: Dict[Tuple[str, bool], Tuple[Engine, Any, _Ticker]] = {}
_compiled_lock = threading.Lock()


def _compiled(path: Path, fuel: bool, cache_dir: Optional[Path]) -> Tuple[Engine, Any, _Ticker]:
    """The engine, compiled component and epoch ticker for `path`, compiled once per process."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BackstopError(
            f"component not found at {path}: build it with `cargo build -p backstop-host` "
            f"or set BACKSTOP_COMPONENT ({e.strerror})") from None
    digest = hashlib.sha256(data).hexdigest()[:24]
    key = (digest, fuel)
    with _compiled_lock:
        if key in _compiled_cache:
            return _compiled_cache[key]
        cfg = _EngineConfig()
        cfg.consume_fuel = fuel
        cfg.epoch_interruption = True
        engine = Engine(cfg)
        component = None
        artifact = None
        if cache_dir is not None:
            version = importlib.metadata.version("wasmtime")
            artifact = cache_dir / f"backstop-{digest}-wasmtime-py{version}-fuel{int(fuel)}-epoch.cwasm"
            try:
                # Only artifacts this function wrote are read; wasmtime checks
                # their header, version and configuration and refuses others.
                component = wc.Component.deserialize(engine, artifact.read_bytes())
            except (OSError, WasmtimeError):
                component = None
        if component is None:
            component = wc.Component(engine, data)
            if artifact is not None:
                try:
                    cache_dir.mkdir(parents=True, exist_ok=True)
                    tmp = artifact.with_suffix(f".tmp{os.getpid()}")
                    tmp.write_bytes(bytes(component.serialize()))
                    os.replace(tmp, artifact)
                except OSError:
                    pass  # a cache that cannot be written only costs a compile next time
        _compiled_cache[key] = (engine, component, _Ticker(engine))
        return _compiled_cache[key]


#: The standard library's encoder, for what ``orjson`` does not write as the
#: standard library would (see :func:`_dumps`).
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _dumps(value: Any, arg: str) -> bytes:
    """A value as UTF-8 JSON text; one that JSON cannot hold is an
    :class:`InputError` naming the argument (under ``config`` a
    :class:`PolicyError`).

    ``orjson`` writes it, ten times faster than ``json`` for a 2 KiB
    evidence. Where the two would differ, ``json`` writes it instead: a
    value ``orjson`` refuses (a non-string key, an integer past 64 bits,
    which ``json`` writes and the component refuses naming its field), and
    any text with a ``null``, because ``orjson`` writes NaN and infinities
    as ``null`` where ``json`` refuses them."""
    try:
        data = orjson.dumps(value)
        if b"null" not in data:
            return data
    except TypeError:
        pass
    try:
        return _ENCODER.encode(value).encode("utf-8")
    except (TypeError, ValueError) as e:
        if arg == "config":
            raise PolicyError("invalid_config", arg, f"not JSON: {e}") from None
        raise InputError(arg, f"not JSON: {e}") from None


class _TextCall:
    """Calls a component function that takes strings and returns
    ``result<string, string>``: takes each string as UTF-8 bytes and returns
    ``(ok, bytes)``.

    wasmtime-py's ``Func.__call__`` reads the function's type back through
    the C API on every call and converts each value by walking that type,
    which costs about 20 µs of a 2 KiB classify's 70 µs. These functions'
    types are fixed, so they are checked once, here, and each call lowers
    its strings and lifts the result directly with wasmtime-py's own C
    bindings (``wasmtime._ffi``, pinned with the package's wasmtime
    version): one copy of each argument into the C value, none out of
    Python's bytes first. The argument values are kept from call to call:
    calls are serialised by :class:`Backstop`'s lock. A call that traps
    raises ``WasmtimeError`` as ``Func`` does.
    """

    _U8P = ctypes.POINTER(ctypes.c_uint8)

    def __init__(self, store: Store, func: Any, name: str):
        ty = func.type(store)
        params, result = [t for _, t in ty.params], ty.result
        text = lambda t: isinstance(t, wc.String)  # noqa: E731
        if not (all(map(text, params)) and isinstance(result, wc.ResultType)
                and text(result.ok) and text(result.err)):
            raise BackstopError(f"{name} does not take strings and return result<string, string>")
        self._func = func
        self._ref = ctypes.byref(func._func)
        self._arity = len(params)
        self._vals = (_ffi.wasmtime_component_val_t * self._arity)()
        self._strings = [(ctypes.byref(v.of.string), ctypes.byref(v)) for v in self._vals]

    def __call__(self, store: Store, *args: bytes) -> Tuple[bool, bytes]:
        if len(args) != self._arity:
            raise TypeError(f"expected {self._arity} arguments, got {len(args)}")
        vals = self._vals
        for val, (string, _), arg in zip(vals, self._strings, args):
            val.kind = _ffi.WASMTIME_COMPONENT_STRING
            _ffi.wasm_byte_vec_new(string, len(arg), ctypes.cast(arg, self._U8P))
        # A fresh value each call: the call writes its result over it without dropping it.
        out = _ffi.wasmtime_component_val_t()
        try:
            error = _ffi.wasmtime_component_func_call(
                self._ref, store._context(), vals, self._arity, ctypes.byref(out), 1)
        finally:
            for _, value in self._strings:
                _ffi.wasmtime_component_val_delete(value)
        if error:
            _enter_wasm(lambda: error)  # raises it, as wasmtime-py's own calls do
        try:
            if out.kind != _ffi.WASMTIME_COMPONENT_RESULT.value:
                raise BackstopError(f"the component returned a value of kind {out.kind}, not a result")
            payload = out.of.result.val.contents.of.string
            return bool(out.of.result.is_ok), ctypes.string_at(payload.data, payload.size)
        finally:
            _ffi.wasmtime_component_val_delete(ctypes.byref(out))


def _answer(raw: Tuple[bool, bytes]) -> bytes:
    """A `result<string, string>` as ``(ok, text)``: the answer's UTF-8
    text, or the refusal (the policy error as JSON, ``{"invalid_input":
    {"field": ..., "rule": ...}}``) raised."""
    ok, text = raw
    if ok:
        return text
    ((kind, error),) = orjson.loads(text).items()
    if kind == "invalid_input":
        raise InputError(error["field"], error["rule"])
    raise PolicyError(kind, error["field"], error["rule"])


class Backstop:
    """One compiled Backstop component and one live instance.

    Each call is bounded by ``timeout`` seconds of wall-clock time (default
    10 s; wasmtime's epoch interruption, checked every ``EPOCH_TICK``) and
    the instance's linear memory by ``memory_bytes`` (default 256 MiB). An
    exact budget of work is available too: ``fuel`` (roughly, wasm
    instructions; ``DEFAULT_FUEL`` is the Rust host's default) compiles the
    component with fuel metering, which makes calls slower. ``None`` turns a
    limit off. A call over a limit raises :class:`LimitError` naming it.
    The compiled component is shared by every ``Backstop`` of the process
    with the same path and fuel setting; with ``cache_dir`` it is also
    kept on disk, precompiled, for the next process (checked by wasmtime
    against its version and configuration, recompiled when refused).
    Calls are serialised by a lock: one instance runs one call at a time.
    The ``timeout``, ``fuel`` and ``memory_bytes`` attributes may be changed
    between calls (fuel left off at construction cannot be switched on later).
    """

    def __init__(self, path: Optional[os.PathLike] = None, *, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 fuel: Optional[int] = None, memory_bytes: Optional[int] = DEFAULT_MEMORY_BYTES,
                 cache_dir: Optional[os.PathLike] = None):
        self.path = Path(path) if path is not None else component_path()
        self._engine, self._component, self._ticker = _compiled(
            self.path, fuel is not None, Path(cache_dir) if cache_dir is not None else None)
        imports = self._component.type.imports(self._engine)
        if imports:
            raise BackstopError(f"the component imports {sorted(imports)}; Backstop grants it nothing")
        # An empty linker: no WASI, no host functions.
        self._linker = wc.Linker(self._engine)
        self.timeout = timeout
        self.fuel = fuel
        self.memory_bytes = memory_bytes
        self._lock = threading.Lock()
        self._live: Optional[Tuple[Store, Dict[str, Any]]] = None
        self._default_config: Optional[str] = None
        self._interface = self._engine_interface()
        self._live = self._instantiate()

    def _engine_interface(self) -> str:
        """The name of the exported engine interface, whichever version it carries;
        the version itself is checked through ``info()``."""
        names = [n for n in self._component.type.exports(self._engine) if n.startswith(ENGINE_INTERFACE_PREFIX)]
        if len(names) != 1:
            raise BackstopError(f"the component exports no single {ENGINE_INTERFACE_PREFIX}<version> interface")
        return names[0]

    def _instantiate(self) -> Tuple[Store, Dict[str, Any]]:
        """A fresh instance. Its contract version is checked first, with the
        typed ``info`` every version exports, so that a component too old to
        have the JSON functions is refused as such."""
        store = Store(self._engine)
        if self.memory_bytes is not None:
            store.set_limits(memory_size=self.memory_bytes)
        if self.fuel is not None:
            store.set_fuel(max(self.fuel, DEFAULT_FUEL))
        store.set_epoch_deadline(_ticks(max(self.timeout or 0, DEFAULT_TIMEOUT)))
        self._memory_in_store = self.memory_bytes
        self._ticker.enter()
        try:
            instance = self._linker.instantiate(store, self._component)
            ix = instance.get_export_index(store, self._interface)
            info = instance.get_func(store, instance.get_export_index(store, "info", ix))(store)
        finally:
            self._ticker.leave()
        check_contract({"package_version": getattr(info, "package-version", None)})
        funcs = {}
        for name in _FUNCTIONS:
            fx = instance.get_export_index(store, name, ix)
            if fx is None:
                raise BackstopError(f"{self._interface} has no function {name}")
            func = instance.get_func(store, fx)
            funcs[name] = _TextCall(store, func, name) if name in _TEXT_FUNCTIONS else func
        return store, funcs

    def _call(self, name: str, *args: Any) -> Any:
        with self._lock:
            if self._live is None or self._memory_in_store != self.memory_bytes:
                self._live = self._instantiate()
            store, funcs = self._live
            if self.fuel is not None:
                store.set_fuel(self.fuel)
            timeout = self.timeout
            store.set_epoch_deadline(_ticks(timeout) if timeout is not None else 1 << 62)
            if timeout is not None:
                self._ticker.enter()
            try:
                return funcs[name](store, *args)
            except WasmtimeError as e:
                self._live = None
                raise self._limit_error(e) from e
            finally:
                if timeout is not None:
                    self._ticker.leave()

    def _limit_error(self, e: WasmtimeError) -> BackstopError:
        text = str(e)
        if "all fuel consumed" in text:
            return LimitError("fuel", self.fuel or 0, f"fuel limit hit: the call burned all {self.fuel} units of fuel")
        if "interrupt" in text:
            return LimitError("time", self.timeout,
                              f"time limit hit: the call ran longer than its timeout of {self.timeout} s")
        if self.memory_bytes is not None and "unreachable" in text:
            # wasmtime-py has no memory-limiter callback: a refused memory.grow
            # makes the guest's allocator abort, a bare `unreachable` trap. The
            # core has no other abort path, so under a memory cap this is it.
            return LimitError(
                "memory", self.memory_bytes,
                f"memory limit hit: the component aborted with its linear memory capped at "
                f"{self.memory_bytes} bytes (an allocation was refused)")
        return TrapError(f"the component trapped: {text.strip()}")

    # -- the engine interface ------------------------------------------------

    def classify(self, evidence: dict) -> dict:
        """Classify failure evidence; returns the classification dict."""
        return orjson.loads(_answer(self._call("classify-json", _dumps(evidence, "evidence"))))

    def classify_with(self, evidence: dict, config: dict) -> dict:
        """Classify as :meth:`next_action` sees it under ``config`` (its
        evidence bounds and operator markers, ``config["classify"]["markers"]``);
        raises :class:`PolicyError` on a config the policy refuses."""
        raw = self._call("classify-with-json", _dumps(evidence, "evidence"), _dumps(config, "config"))
        return orjson.loads(_answer(raw))

    def next_action(self, state: dict) -> dict:
        """Decide what to do next. Returns the decision dict (with
        ``record_json``, the record exactly as the component wrote it);
        raises :class:`PolicyError` (:class:`InputError` for the state's own
        values) on a config or input the policy refuses."""
        record = _answer(self._call("next-action-json", _dumps(state, "state")))
        decision = orjson.loads(record)
        decision["record_json"] = record.decode("utf-8")
        return decision

    def signature(self, detail: str, check: Optional[str] = None) -> str:
        """The normalised one-line signature of a failure detail."""
        if not isinstance(detail, str):
            raise InputError("detail", f"expected a string, got {type(detail).__name__}")
        if check is not None and not isinstance(check, str):
            raise InputError("check", f"expected a string or None, got {type(check).__name__}")
        return self._call("signature", detail, check)

    def default_config(self) -> dict:
        """The default configuration (a fresh dict each call)."""
        if self._default_config is None:
            self._default_config = self._call("default-config-json")
        return json.loads(self._default_config)

    def info(self) -> dict:
        """Package version, record schema version, marker-table digest and count."""
        return json.loads(self._call("info-json"))


_shared: Optional[Backstop] = None
_shared_lock = threading.Lock()


def _backstop() -> Backstop:
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Backstop()
        return _shared


def classify(evidence: dict) -> dict:
    """Classify failure evidence with the shared :class:`Backstop`."""
    return _backstop().classify(evidence)


def classify_with(evidence: dict, config: dict) -> dict:
    """Classify under a configuration, with the shared :class:`Backstop`."""
    return _backstop().classify_with(evidence, config)


def next_action(state: dict) -> dict:
    """Decide what to do next with the shared :class:`Backstop`."""
    return _backstop().next_action(state)


def signature(detail: str, check: Optional[str] = None) -> str:
    """The signature of a failure detail, with the shared :class:`Backstop`."""
    return _backstop().signature(detail, check)


def default_config() -> dict:
    """The default configuration, from the shared :class:`Backstop`."""
    return _backstop().default_config()


def info() -> dict:
    """What this build of Backstop is, from the shared :class:`Backstop`."""
    return _backstop().info()
