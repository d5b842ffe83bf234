"""Backstop for Python: the Backstop WebAssembly component, run by wasmtime.

The component imports nothing, so it is instantiated with an empty
``Linker``: no WASI, no capabilities. One compiled component and one live
instance are reused across calls; a call that traps (for example on a
limit) discards the instance and the next call starts a fresh one.

Values are plain dicts in the JSON shape of the vectors and the CLI:
snake_case keys, snake_case enum values, the variant ``situation`` as
``{"step_failed": {...}}``, durations in nanoseconds and timestamps in
milliseconds as ``int`` (a u64 may also be given as a decimal string).
Optional fields may be left out or ``None``; the rules for left-out fields
are those of the Rust model (``src/model.rs``): a left-out part of
``config`` takes its default, other fields their zero value, and
``situation`` and a history event's ``kind`` are required.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import os
import re
import threading
import tomllib
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple


from wasmtime import Config as _EngineConfig
from wasmtime import Engine, Store, WasmtimeError
from wasmtime import component as wc

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

#: Per-call limits, the same defaults as the Rust host (``backstop_host::Limits``).
DEFAULT_FUEL = 10_000_000_000
DEFAULT_MEMORY_BYTES = 256 << 20


class BackstopError(Exception):
    """Any error raised by this package."""


class PolicyError(BackstopError):
    """``next_action`` refused: ``kind`` is ``invalid_config`` or
    ``invalid_input``; ``field`` and ``rule`` name what broke which rule."""

    def __init__(self, kind: str, field: str, rule: str):
        super().__init__(f"{kind.replace('_', ' ')}: {field}: {rule}")
        self.kind = kind
        self.field = field
        self.rule = rule

    def to_dict(self) -> Dict[str, Dict[str, str]]:
        """The error in the JSON shape: ``{"invalid_config": {"field": ..., "rule": ...}}``."""
        return {self.kind: {"field": self.field, "rule": self.rule}}


class InputError(BackstopError, ValueError):
    """A value does not fit the JSON shape (unknown key, wrong type, out of range)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


class LimitError(BackstopError):
    """A call ran out of a per-call limit; ``limit`` is ``"fuel"`` or ``"memory"``."""

    def __init__(self, limit: str, value: int, message: str):
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
    major, minor, _ = _version_key(host_version) or (0, 0, 0)
    return f"{major}.{minor}.x" if major == 0 else f"{major}.{minor}.0 up to, not including, {major + 1}.0.0"


def supports_contract(component_version: str, host_version: Optional[str] = None) -> bool:
    """Whether this package works with a component of ``component_version``
    (its ``info()["package_version"]``). The rule of docs/versioning.md:
    before 1.0 the minor version must match (any patch); from 1.0 the major
    version must match and the component's minor be at least the package's."""
    c, h = _version_key(component_version), _version_key(host_version or __version__)
    if c is None or h is None:
        return False
    if h[0] == 0:
        return c[:2] == h[:2]
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
# The value schema, read from the component's own types.
#
# Nodes are tuples: ("bool",), ("int", lo, hi), ("u64",), ("f64",),
# ("string",), ("list", elem), ("option", inner), ("enum", [wit names]),
# ("variant", {wit name: node or None}), ("record", [(wit, snake, node)]),
# ("result", ok, err).

U64_MAX = (1 << 64) - 1
_INT_RANGES = {
    wc.U8: (0, 0xFF),
    wc.U16: (0, 0xFFFF),
    wc.U32: (0, 0xFFFF_FFFF),
    wc.S8: (-0x80, 0x7F),
    wc.S16: (-0x8000, 0x7FFF),
    wc.S32: (-0x8000_0000, 0x7FFF_FFFF),
    wc.S64: (-(1 << 63), (1 << 63) - 1),
}


def _snake(name: str) -> str:
    return name.replace("-", "_")


def _schema(t: Any) -> tuple:
    if isinstance(t, wc.Bool):
        return ("bool",)
    if isinstance(t, wc.U64):
        return ("u64",)
    for cls, (lo, hi) in _INT_RANGES.items():
        if isinstance(t, cls):
            return ("int", lo, hi)
    if isinstance(t, (wc.F64, wc.F32)):
        return ("f64",)
    if isinstance(t, wc.String):
        return ("string",)
    if isinstance(t, wc.ListType):
        return ("list", _schema(t.element))
    if isinstance(t, wc.OptionType):
        return ("option", _schema(t.payload))
    if isinstance(t, wc.EnumType):
        return ("enum", list(t.names))
    if isinstance(t, wc.VariantType):
        return ("variant", {n: (_schema(p) if p is not None else None) for n, p in t.cases})
    if isinstance(t, wc.RecordType):
        return ("record", [(n, _snake(n), _schema(f)) for n, f in t.fields])
    if isinstance(t, wc.ResultType):
        return ("result", _schema(t.ok), _schema(t.err))
    raise TypeError(f"unsupported component type {type(t).__name__}")


def _fields(node: tuple) -> frozenset:
    return frozenset(snake for _, snake, _ in node[1])


# Records whose Rust model ignores unknown keys (no `deny_unknown_fields`):
# the evidence, its steps and its headers. Every other input record rejects them.
_LENIENT = (
    frozenset({"steps", "text", "exit_code", "signal", "run_status", "runner_stderr",
               "http_status", "error_type", "error_code", "headers"}),
    frozenset({"id", "status", "error", "output", "stdout", "stderr", "exit_code", "signal"}),
    frozenset({"name", "value"}),
)
# Fields the Rust model requires (no serde default), by record.
_REQUIRED = {
    frozenset({"now", "entropy", "config", "situation"}): {"situation"},
    frozenset({"at", "kind", "breaker", "actor", "detail", "check", "diagnosis"}): {"kind"},
}


def _lower(node: tuple, v: Any, path: str, defaults: Any = None) -> Any:
    """A JSON-shape value to the value wasmtime lowers for `node`."""
    kind = node[0]
    if kind == "option":
        if v is None:
            return None
        return _lower(node[1], v, path, defaults)
    if v is None:
        raise InputError(path, "null where a value is required")
    if kind == "string":
        if not isinstance(v, str):
            raise InputError(path, f"expected a string, got {type(v).__name__}")
        return v
    if kind == "bool":
        if not isinstance(v, bool):
            raise InputError(path, f"expected a boolean, got {type(v).__name__}")
        return v
    if kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise InputError(path, f"expected an integer, got {type(v).__name__}")
        if not node[1] <= v <= node[2]:
            raise InputError(path, f"{v} is out of range [{node[1]}, {node[2]}]")
        return v
    if kind == "u64":
        if isinstance(v, str):
            s = v.strip()
            if not re.fullmatch(r"\+?[0-9]+", s):
                raise InputError(path, f"expected an unsigned integer, got {v!r}")
            v = int(s)
        elif isinstance(v, bool) or not isinstance(v, int):
            raise InputError(path, f"expected an unsigned integer, got {type(v).__name__}")
        if not 0 <= v <= U64_MAX:
            raise InputError(path, f"{v} is out of range [0, {U64_MAX}]")
        return v
    if kind == "f64":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(path, f"expected a number, got {type(v).__name__}")
        return float(v)
    if kind == "list":
        if not isinstance(v, (list, tuple)):
            raise InputError(path, f"expected a list, got {type(v).__name__}")
        return [_lower(node[1], x, f"{path}[{i}]") for i, x in enumerate(v)]
    if kind == "enum":
        if not isinstance(v, str) or "-" in v or v.replace("_", "-") not in node[1]:
            names = ", ".join(_snake(n) for n in node[1])
            raise InputError(path, f"unknown value {v!r}, expected one of {names}")
        return v.replace("_", "-")
    if kind == "variant":
        if not isinstance(v, dict) or len(v) != 1:
            names = ", ".join(_snake(n) for n in node[1])
            raise InputError(path, f"expected an object with exactly one of {names}")
        (tag, payload), = v.items()
        wit = tag.replace("_", "-") if isinstance(tag, str) and "-" not in tag else None
        if wit not in node[1]:
            names = ", ".join(_snake(n) for n in node[1])
            raise InputError(path, f"unknown case {tag!r}, expected one of {names}")
        case = node[1][wit]
        return wc.Variant(wit, None if case is None else _lower(case, payload, f"{path}.{tag}"))
    if kind == "record":
        return _lower_record(node, v, path, defaults)
    raise TypeError(f"cannot lower {kind}")

def _lower_record(node: tuple, v: Any, path: str, defaults: Any) -> Any:
    """A JSON object to a record: unknown keys refused (except where the Rust
    model is lenient), left-out fields from `defaults` or their zero value."""
    if not isinstance(v, dict):
        raise InputError(path, f"expected an object, got {type(v).__name__}")
    names = _fields(node)
    if names not in _LENIENT:
        for k in v:
            if k not in names:
                raise InputError(f"{path}.{k}", f"unknown field, expected one of {', '.join(sorted(names))}")
    required = _REQUIRED.get(names, set())
    r = wc.Record()
    for wit, snake, fnode in node[1]:
        sub = f"{path}.{snake}" if path else snake
        fdefault = defaults.get(snake) if isinstance(defaults, dict) else None
        if snake in v:
            val = _lower(fnode, v[snake], sub, fdefault)
        elif snake in required:
            raise InputError(sub, "missing field")
        elif fdefault is not None:
            val = _lower(fnode, fdefault, sub)
        else:
            val = _zero(fnode, sub)
        setattr(r, wit, val)
    return r



def _zero(node: tuple, path: str) -> Any:
    """The value of a left-out field: serde's `Default` of its Rust type."""
    kind = node[0]
    if kind == "option":
        return None
    if kind == "string":
        return ""
    if kind == "bool":
        return False
    if kind in ("int", "u64"):
        return 0
    if kind == "f64":
        return 0.0
    if kind == "list":
        return []
    if kind == "enum":
        return node[1][0]
    if kind == "record":
        return _lower(node, {}, path)
    raise InputError(path, "missing field")


def _lift(node: tuple, v: Any) -> Any:
    """A value wasmtime lifted for `node` to the JSON shape."""
    kind = node[0]
    if v is None:
        return None
    if kind == "option":
        return _lift(node[1], v)
    if kind == "list":
        return [_lift(node[1], x) for x in v]
    if kind == "enum":
        return _snake(v)
    if kind == "variant":
        case = node[1][v.tag]
        return {_snake(v.tag): None if case is None else _lift(case, v.payload)}
    if kind == "record":
        return {snake: _lift(fnode, getattr(v, wit)) for wit, snake, fnode in node[1]}
    return v


# ---------------------------------------------------------------------------

_compiled_cache: Dict[Tuple[str, bool], Tuple[Engine, Any]] = {}
_compiled_lock = threading.Lock()


def _compiled(path: Path, fuel: bool, cache_dir: Optional[Path]) -> Tuple[Engine, Any]:
    """The engine and compiled component for `path`, compiled once per process."""
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
        engine = Engine(cfg)
        component = None
        artifact = None
        if cache_dir is not None:
            version = importlib.metadata.version("wasmtime")
            artifact = cache_dir / f"backstop-{digest}-wasmtime-py{version}-fuel{int(fuel)}.cwasm"
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
        _compiled_cache[key] = (engine, component)
        return engine, component


class Backstop:
    """One compiled Backstop component and one live instance.

    ``fuel`` caps the work of each call (wasm instructions, roughly) and
    ``memory_bytes`` the instance's linear memory; ``None`` turns a limit
    off. The defaults are those of the Rust host: 10^10 fuel, 256 MiB.
    The compiled component is shared by every ``Backstop`` of the process
    with the same path and fuel setting; with ``cache_dir`` it is also
    kept on disk, precompiled, for the next process (checked by wasmtime
    against its version and configuration, recompiled when refused).
    Calls are serialised by a lock: one instance runs one call at a time.
    The ``fuel`` and ``memory_bytes`` attributes may be changed between
    calls (a limit left off at construction cannot be switched on later).
    """

    def __init__(self, path: Optional[os.PathLike] = None, *, fuel: Optional[int] = DEFAULT_FUEL,
                 memory_bytes: Optional[int] = DEFAULT_MEMORY_BYTES,
                 cache_dir: Optional[os.PathLike] = None):
        self.path = Path(path) if path is not None else component_path()
        self._engine, self._component = _compiled(self.path, fuel is not None,
                                                  Path(cache_dir) if cache_dir is not None else None)
        imports = self._component.type.imports(self._engine)
        if imports:
            raise BackstopError(f"the component imports {sorted(imports)}; Backstop grants it nothing")
        # An empty linker: no WASI, no host functions.
        self._linker = wc.Linker(self._engine)
        self.fuel = fuel
        self.memory_bytes = memory_bytes
        self._lock = threading.Lock()
        self._live: Optional[Tuple[Store, Dict[str, Any]]] = None
        self._types: Dict[str, Tuple[List[tuple], Optional[tuple]]] = {}
        self._default_config: Optional[dict] = None
        self._interface = self._engine_interface()
        store, funcs = self._instantiate()
        for name, f in funcs.items():
            ft = f.type(store)
            self._types[name] = ([(_schema(t), n) for n, t in ft.params], _schema(ft.result) if ft.result else None)
        self._live = (store, funcs)
        # The contract check reads info() under the default fuel, whatever cap the caller asked for.
        asked, self.fuel = fuel, None if fuel is None else max(fuel, DEFAULT_FUEL)
        try:
            check_contract(self.info())
        finally:
            self.fuel = asked

    def _engine_interface(self) -> str:
        """The name of the exported engine interface, whichever version it carries;
        the version itself is checked through ``info()``."""
        names = [n for n in self._component.type.exports(self._engine) if n.startswith(ENGINE_INTERFACE_PREFIX)]
        if len(names) != 1:
            raise BackstopError(f"the component exports no single {ENGINE_INTERFACE_PREFIX}<version> interface")
        return names[0]

    def _instantiate(self) -> Tuple[Store, Dict[str, Any]]:
        store = Store(self._engine)
        if self.memory_bytes is not None:
            store.set_limits(memory_size=self.memory_bytes)
        if self.fuel is not None:
            store.set_fuel(self.fuel)
        self._memory_in_store = self.memory_bytes
        instance = self._linker.instantiate(store, self._component)
        ix = instance.get_export_index(store, self._interface)
        funcs = {}
        for name in ("classify", "classify-with", "next-action", "signature", "default-config", "info"):
            fx = instance.get_export_index(store, name, ix)
            if fx is None:
                raise BackstopError(f"{self._interface} has no function {name}")
            funcs[name] = instance.get_func(store, fx)
        return store, funcs

    def _call(self, name: str, *args: Any, defaults: Any = None) -> Any:
        params, result = self._types[name]
        # Paths in errors: a record's fields by their own names (as the Rust
        # model's errors: `situation.step_failed.attempt`), other values by
        # the parameter's name.
        lowered = [_lower(node, a, "" if node[0] == "record" else pname, defaults)
                   for (node, pname), a in zip(params, args)]
        with self._lock:
            if self._live is None:
                self._live = self._instantiate()
            if self._memory_in_store != self.memory_bytes:
                self._live = self._instantiate()
            store, funcs = self._live
            if self.fuel is not None:
                store.set_fuel(self.fuel)
            try:
                raw = funcs[name](store, *lowered)
            except WasmtimeError as e:
                self._live = None
                raise self._limit_error(e) from e
        return result, raw

    def _limit_error(self, e: WasmtimeError) -> BackstopError:
        text = str(e)
        if "all fuel consumed" in text:
            return LimitError("fuel", self.fuel or 0, f"fuel limit hit: the call burned all {self.fuel} units of fuel")
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
        node, raw = self._call("classify", evidence)
        return _lift(node, raw)

    def classify_with(self, evidence: dict, config: dict) -> dict:
        """Classify as :meth:`next_action` sees it under ``config`` (its
        evidence bounds and operator markers, ``config["classify"]["markers"]``);
        raises :class:`PolicyError` on a config the policy refuses."""
        node, raw = self._call("classify-with", evidence, config, defaults=self.default_config())
        return _result(node, raw)

    def next_action(self, state: dict) -> dict:
        """Decide what to do next. Returns the decision dict (with
        ``record_json``); raises :class:`PolicyError` on a config or input
        the policy refuses."""
        node, raw = self._call("next-action", state, defaults={"config": self.default_config()})
        return _result(node, raw)

    def signature(self, detail: str, check: Optional[str] = None) -> str:
        """The normalised one-line signature of a failure detail."""
        _, raw = self._call("signature", detail, check)
        return raw

    def default_config(self) -> dict:
        """The default configuration (a fresh dict each call)."""
        if self._default_config is None:
            node, raw = self._call("default-config")
            self._default_config = _lift(node, raw)
        return _deep_copy(self._default_config)

    def info(self) -> dict:
        """Package version, record schema version, marker-table digest and count."""
        node, raw = self._call("info")
        return _lift(node, raw)


def _result(node: tuple, raw: Any) -> dict:
    """A `result<T, policy-error>`: T lifted, or :class:`PolicyError` raised."""
    _, ok, err = node
    if isinstance(raw, wc.Variant):
        e = _lift(err, raw)
        (kind, fe), = e.items()
        raise PolicyError(kind, fe["field"], fe["rule"])
    return _lift(ok, raw)


def _deep_copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _deep_copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_deep_copy(x) for x in v]
    return v


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
