"""Runs every shared vector (tests/vectors/*.json) through the Python host.

The loader and matcher are a port of tests/common/mod.rs: the same files,
the same count (cases, not story steps), the same matching rules. Also runs
the embedding example of docs/embedding.md. Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# The installed package (scripts/test-python installs the wheel into a fresh
# virtual environment), never the source tree beside this file.
import backstop  # noqa: E402

VECTOR_DIR = ROOT / "tests" / "vectors"


class Mismatch(Exception):
    pass


def _dump(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def as_f64(v: Any) -> Optional[float]:
    """A JSON number, or a string that parses as a u64 (Rust `str::parse::<u64>`)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and re.fullmatch(r"\+?[0-9]+", v) and int(v) <= (1 << 64) - 1:
        return float(int(v))
    return None


def matches(expected: Any, actual: Any, path: str) -> None:
    """Checks `actual` against the `expected` subset; raises Mismatch on the first difference."""
    if isinstance(expected, dict):
        if len(expected) == 1:
            b = expected.get("between")
            if isinstance(b, list):
                n = as_f64(actual)
                if n is None:
                    raise Mismatch(f"{path}: expected a number, got {_dump(actual)}")
                lo, hi = as_f64(b[0]), as_f64(b[1])
                if not (lo <= n <= hi):
                    raise Mismatch(f"{path}: {n} not in [{lo}, {hi}]")
                return
            s = expected.get("contains")
            if isinstance(s, str):
                if isinstance(actual, str) and s in actual:
                    return
                raise Mismatch(f"{path}: {_dump(actual)} does not contain {s!r}")
            if expected.get("absent") is True:
                if actual is None:
                    return
                raise Mismatch(f"{path}: expected absent, got {_dump(actual)}")
        if not isinstance(actual, dict):
            raise Mismatch(f"{path}: expected an object, got {_dump(actual)}")
        for k, ev in expected.items():
            matches(ev, actual.get(k), f"{path}.{k}")
        return
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            raise Mismatch(f"{path}: expected {len(expected)} items, got {len(actual)}: {_dump(actual)}")
        for i, (ev, av) in enumerate(zip(expected, actual)):
            matches(ev, av, f"{path}[{i}]")
        return
    x, y = as_f64(expected), as_f64(actual)
    if x is not None and y is not None:
        if x == y:
            return
        raise Mismatch(f"{path}: expected {_dump(expected)}, got {_dump(actual)}")
    if _json_equal(expected, actual):
        return
    raise Mismatch(f"{path}: expected {_dump(expected)}, got {_dump(actual)}")


def _json_equal(a: Any, b: Any) -> bool:
    """serde_json Value equality: no bool/number confusion, as Python's == has."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b and not (isinstance(a, float) and math.isnan(a))
    return type(a) is type(b) and a == b


def vector_files() -> List[Tuple[str, Any]]:
    files = sorted(p for p in VECTOR_DIR.iterdir() if p.suffix == ".json")
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in files]


def answer(b: backstop.Backstop, function: str, step: dict) -> Tuple[bool, Any]:
    """(ok, result-or-error as JSON) for one call; the error shape is the Rust runner's."""
    inp = step.get("input")
    try:
        if function == "classify":
            return True, b.classify(inp)
        if function in ("next_action", "story"):
            d = b.next_action(inp)
            # The record the component rendered is the same object as the data.
            record = json.loads(d["record_json"])
            rest = {k: v for k, v in d.items() if k != "record_json"}
            if record != rest or list(record) != list(rest):
                raise AssertionError(f"record_json differs from the decision:\n{record}\n{rest}")
            return True, d
        if function == "signature":
            detail = inp.get("detail")
            check = inp.get("check")
            return True, b.signature(detail if isinstance(detail, str) else "",
                                     check if isinstance(check, str) else None)
    except backstop.PolicyError as e:
        return False, e.to_dict()
    except backstop.InputError as e:
        return False, {"parse": str(e)}
    raise ValueError(f"unknown function {function}")


def run_all(b: backstop.Backstop) -> Tuple[int, List[str]]:
    count = 0
    failures: List[str] = []
    for file, v in vector_files():
        function = v["function"]
        for case in v["cases"]:
            cid = case.get("id", "?")
            count += 1
            steps = case["steps"] if function == "story" else [case]
            for i, step in enumerate(steps):
                where = f"{file}/{cid} step {i + 1}" if function == "story" else f"{file}/{cid}"
                ok, got = answer(b, function, step)
                has_exp, has_err = "expected" in step, "expected_error" in step
                try:
                    if ok and has_exp and not has_err:
                        matches(step["expected"], got, "result")
                    elif not ok and has_err and not has_exp:
                        matches(step["expected_error"], got, "error")
                    elif ok and has_err and not has_exp:
                        raise Mismatch(f"expected an error, got {_dump(got)}")
                    elif not ok and has_exp and not has_err:
                        raise Mismatch(f"unexpected error {_dump(got)}")
                    else:
                        raise Mismatch("a case needs exactly one of expected, expected_error")
                except Mismatch as e:
                    failures.append(f"{where}: {e}")
    return count, failures


def test_doc_example() -> List[str]:
    """Runs the Python example of docs/embedding.md exactly as written."""
    doc = (ROOT / "docs" / "embedding.md").read_text(encoding="utf-8")
    m = re.search(r"```python\n(.*?)```", doc, re.S)
    if not m:
        return ["docs/embedding.md has no python example"]
    example = m.group(1)
    own = (HERE / "example.py").read_text(encoding="utf-8")
    problems = []
    if example != own:
        problems.append("the python example in docs/embedding.md differs from host-py/tests/example.py")
    env = {"PATH": "/usr/bin:/bin"}
    import os
    if "BACKSTOP_COMPONENT" in os.environ:
        env["BACKSTOP_COMPONENT"] = os.environ["BACKSTOP_COMPONENT"]
    # -I: the installed package only (no PYTHONPATH, no current directory on sys.path).
    out = subprocess.run([sys.executable, "-I", "-c", example], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        problems.append(f"the example failed: {out.stderr}")
    elif out.stdout.strip() != "transient_transport api error: 529":
        problems.append(f"the example printed {out.stdout!r}")
    return problems


def limit_problem(call, limit: str, what: str) -> List[str]:
    """`call()` must fail with a LimitError naming `limit` ("fuel", "memory",
    "time"); the problem found, if any."""
    try:
        call()
    except backstop.LimitError as e:
        if e.limit != limit or f"{limit} limit" not in str(e):
            return [f"{limit}: wrong error {e}"]
        return []
    return [f"{limit}: {what} did not fail"]


def test_limits() -> List[str]:
    """A large input under a tiny fuel or memory cap fails naming the limit; the next call recovers."""
    problems = []
    big = {"text": "x" * (64 * 1024) + " API Error: 529"}
    b = backstop.Backstop(fuel=10_000)
    problems += limit_problem(lambda: b.classify(big), "fuel", "a 64 KiB classify within 10000 fuel")
    b.fuel = backstop.DEFAULT_FUEL
    if b.classify(big)["class"] != "transient_transport":
        problems.append("fuel: the call after a fuel trap did not recover")
    # A fresh instance builds the marker tables on first use (about 2 MiB with
    # the wasm stack); 4 MiB holds them, an 8 MiB input does not fit.
    m = backstop.Backstop(memory_bytes=4 << 20)
    problems += limit_problem(lambda: m.classify({"text": "y" * (8 << 20)}), "memory",
                              "an 8 MiB input under a 4 MiB cap")
    if m.classify({"text": "socket hang up"})["class"] != "transient_transport":
        problems.append("memory: the call after a memory trap did not recover")
    return problems


def test_time_limit() -> List[str]:
    """The default bound is wall-clock time: a call over its timeout fails naming
    the limit, the next call recovers, a normal call passes under the default."""
    problems = []
    b = backstop.Backstop()
    if b.fuel is not None or b.timeout != backstop.DEFAULT_TIMEOUT:
        problems.append(f"time: the default bound is fuel {b.fuel}, timeout {b.timeout}")
    big = {"text": "x" * (15 << 20) + " API Error: 529"}  # about 0.1 s of work, near the 16 MiB bound
    b.timeout = 0.001
    problems += limit_problem(lambda: b.classify(big), "time", "a 15 MiB classify within a 1 ms timeout")
    b.timeout = backstop.DEFAULT_TIMEOUT
    if b.classify(big)["class"] != "transient_transport":
        problems.append("time: the same call under the default timeout failed")
    # A forked process (a Celery worker) has no ticker thread of its parent's: it starts its own.
    pid = os.fork()
    if pid == 0:
        child = backstop.Backstop(timeout=0.001)
        try:
            child.classify(big)
            os._exit(1)
        except backstop.LimitError as e:
            os._exit(0 if e.limit == "time" else 2)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        problems.append(f"time: in a forked child the timeout did not hold (exit {os.waitstatus_to_exitcode(status)})")
    return problems


def test_classify_with() -> List[str]:
    """classify_with applies the operator's markers and refuses a bad one by field."""
    problems = []
    marker = {"class": "work", "marker": "bundle_rejected", "match": "word", "source": "our deploy tool"}
    evidence = {"text": "deployctl: BUNDLE_REJECTED after API Error: 529 Overloaded"}
    if backstop.classify(evidence)["class"] != "transient_transport":
        problems.append("classify_with: the shipped tables alone do not retry the 529")
    c = backstop.classify_with(evidence, {"classify": {"markers": [marker]}})
    if (c["class"], c["signal"], c["source"]) != ("work", "bundle_rejected", "operator_marker"):
        problems.append(f"classify_with: {c['class']} {c['signal']} {c['source']}")
    try:
        backstop.classify_with(evidence, {"classify": {"markers": [dict(marker, marker="Bundle")]}})
        problems.append("classify_with: an upper-case marker was accepted")
    except backstop.PolicyError as e:
        if (e.kind, e.field) != ("invalid_config", "config.classify.markers[0].marker"):
            problems.append(f"classify_with: {e.to_dict()}")
    return problems


def test_shape() -> List[str]:
    """Input errors name the path; policy errors carry field and rule; info and config read back."""
    problems = []
    b = backstop.Backstop()
    for bad, where in [
        ({"situation": {"step_failed": {"attempt": 1, "bogus": 1}}}, "situation.step_failed.bogus"),
        ({"situation": {"nope": {}}}, "situation"),
        ({"situation": {"step_failed": {"attempt": -1}}}, "situation.step_failed.attempt"),
        ({"situation": {"step_failed": {"attempt": 1, "waited": "12x"}}}, "situation.step_failed.waited"),
        ({"now": 1}, "situation"),
    ]:
        try:
            b.next_action(bad)
            problems.append(f"accepted {bad}")
        except backstop.InputError as e:
            if e.path != where:
                problems.append(f"{bad}: path {e.path}, expected {where}")
    try:
        b.next_action({"config": {"transport": {"max_attempts": 11}},
                       "situation": {"step_failed": {"attempt": 1}}})
        problems.append("max_attempts 11 accepted")
    except backstop.PolicyError as e:
        if (e.kind, e.field) != ("invalid_config", "config.transport.max_attempts"):
            problems.append(f"policy error {e.to_dict()}")
    cfg = b.default_config()
    if cfg["transport"]["max_attempts"] != 3 or [x["kind"] for x in cfg["breakers"]] != ["build", "review"]:
        problems.append(f"default config {cfg}")
    i = b.info()
    if set(i) != {"package_version", "schema_version", "markers_digest", "marker_count"} or i["marker_count"] < 1:
        problems.append(f"info {i}")
    # The decision functions are called through _TextCall, which checks their
    # types once: a function of another type is refused, not misread.
    store, funcs = b._live
    try:
        backstop._TextCall(store, funcs["signature"], "signature")
        problems.append("_TextCall took `signature` (a bare string result) for result<string, string>")
    except backstop.BackstopError:
        pass
    # Text that is not ASCII crosses both ways intact (lengths are UTF-8 bytes).
    c = b.classify({"text": "Überlastung — 負荷 API Error: 529 Overloaded"})
    if c["class"] != "transient_transport" or "Überlastung — 負荷" not in json.dumps(c, ensure_ascii=False):
        problems.append(f"non-ASCII evidence: {c}")
    # What orjson writes differently from json is written by json: NaN (orjson
    # writes null) is refused naming the argument; an integer past 64 bits
    # (orjson refuses it) reaches the component, which names its field.
    for ev, where, rule in [({"text": "x", "exit_code": math.nan}, "evidence", "not JSON: Out of range float"),
                            ({"text": "x", "exit_code": 1 << 70}, "evidence.exit_code", "invalid type")]:
        try:
            b.classify(ev)
            problems.append(f"accepted {ev}")
        except backstop.InputError as e:
            if e.path != where or not e.rule.startswith(rule):
                problems.append(f"{ev}: {e.to_dict()}")
    if b.classify({"text": "API Error: 529 Overloaded", "exit_code": None})["class"] != "transient_transport":
        problems.append("a null exit code was not read as none")
    # u64 given as a decimal string is read as the number.
    d = b.next_action({"now": "1700000000000", "entropy": str((1 << 64) - 1),
                       "situation": {"step_failed": {"attempt": 1,
                                                     "evidence": {"text": "API Error: 529 Overloaded"}}}})
    if d["action"] != "retry" or not isinstance(d["delay"], int):
        problems.append(f"decision {d}")
    return problems


def test_cache_dir() -> List[str]:
    """With cache_dir, the compiled component is written once, read back, and a corrupt artifact replaced."""
    import tempfile
    problems = []
    with tempfile.TemporaryDirectory() as d:
        backstop._compiled_cache.clear()
        first = backstop.Backstop(cache_dir=d).signature("error: x 12")
        files = list(Path(d).glob("*.cwasm"))
        if len(files) != 1:
            return [f"cache: expected one artifact, got {files}"]
        backstop._compiled_cache.clear()
        t = time.perf_counter()
        second = backstop.Backstop(cache_dir=d).signature("error: x 12")
        load_ms = (time.perf_counter() - t) * 1000
        files[0].write_bytes(b"not a cwasm")
        backstop._compiled_cache.clear()
        third = backstop.Backstop(cache_dir=d).signature("error: x 12")
        if not first == second == third == "error: x <n>":
            problems.append(f"cache: {first!r} {second!r} {third!r}")
        if files[0].stat().st_size < 1000:
            problems.append("cache: the corrupt artifact was not replaced")
        print(f"python host: precompiled load {load_ms:.0f} ms")
    return problems


def main() -> int:
    where = Path(backstop.__file__).resolve().parent
    print(f"python host: backstop {backstop.__version__} imported from {where}")
    if where.is_relative_to(ROOT / "host-py"):
        print("FAIL the vectors run against the installed wheel, not the source tree (scripts/test-python)")
        return 1
    t0 = time.perf_counter()
    b = backstop.Backstop()
    t_load = time.perf_counter() - t0
    t1 = time.perf_counter()
    count, failures = run_all(b)
    t_run = time.perf_counter() - t1
    print(f"python host: {count} vectors ({t_load * 1000:.0f} ms to compile, {t_run * 1000:.0f} ms to run)")
    problems = (test_doc_example() + test_limits() + test_time_limit() + test_shape() + test_classify_with()
                + test_cache_dir())
    for f in failures:
        print(f"FAIL {f}")
    for p in problems:
        print(f"FAIL {p}")
    if failures or problems or count == 0:
        print(f"python host: {len(failures)} of {count} vectors failed, {len(problems)} other failures")
        return 1
    print("python host: all vectors, the embedding example, limits and shape checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
