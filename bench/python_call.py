"""Times one `classify` call from Python (host-py, wasmtime-py) on the 2 KiB
evidence the Rust benchmark wrote, and writes the result as JSON.

Usage: python bench/python_call.py OUT_DIR
Reads OUT_DIR/evidence-2KiB.json, writes OUT_DIR/python.json.
       python bench/python_call.py --serve OUT_DIR
Prints ``ready``, then for each line ``N`` on stdin runs N calls and prints
the mean nanoseconds per call (``bench/hosts_paired.py`` drives it).
"""

import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "host-py"))

BATCHES = 9
BATCH_SECONDS = 0.25


def per_call_ns(fn, batches=BATCHES, batch_seconds=BATCH_SECONDS):
    """Median over batches of the mean time of one call in a batch."""
    # Size a batch so it lasts about batch_seconds.
    n, start = 0, time.perf_counter_ns()
    while time.perf_counter_ns() - start < batch_seconds * 1e9 / 4:
        fn()
        n += 1
    n = max(1, n * 4)
    means = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        means.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(means), n


def serve(out):
    with open(os.path.join(out, "evidence-2KiB.json")) as f:
        evidence = json.load(f)
    import backstop  # noqa: E402  (host-py)

    if backstop.classify(evidence)["class"] != "transient_transport":
        raise SystemExit("python classify did not decide transient_transport")
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        t0 = time.perf_counter_ns()
        for _ in range(n):
            backstop.classify(evidence)
        print((time.perf_counter_ns() - t0) / max(n, 1), flush=True)


def main():
    if sys.argv[1] == "--serve":
        return serve(sys.argv[2])
    out = sys.argv[1]
    with open(os.path.join(out, "evidence-2KiB.json")) as f:
        evidence = json.load(f)

    t0 = time.perf_counter_ns()
    import backstop  # noqa: E402  (host-py)

    import_ns = time.perf_counter_ns() - t0
    t0 = time.perf_counter_ns()
    first = backstop.classify(evidence)
    first_call_ns = time.perf_counter_ns() - t0
    if first["class"] != "transient_transport":
        raise SystemExit(f"python classify decided {first['class']!r}, expected transient_transport")

    steady_ns, per_batch = per_call_ns(lambda: backstop.classify(evidence))
    try:
        import wasmtime

        wasmtime_version = getattr(wasmtime, "__version__", None) or "unknown"
    except Exception:  # pragma: no cover - version is informational
        wasmtime_version = "unknown"
    if wasmtime_version == "unknown":
        try:
            from importlib.metadata import version

            wasmtime_version = version("wasmtime")
        except Exception:
            pass
    result = {
        "host": "python",
        "runtime": f"Python {platform.python_version()}",
        "binding": f"wasmtime-py {wasmtime_version}",
        "call_2kib_ns": steady_ns,
        "calls_per_batch": per_batch,
        "batches": BATCHES,
        "import_ns": import_ns,
        "first_call_ns": first_call_ns,
    }
    with open(os.path.join(out, "python.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(f"python: 2 KiB classify {steady_ns / 1000:.1f} us/call (median of {BATCHES} batches of {per_batch})")


if __name__ == "__main__":
    main()
