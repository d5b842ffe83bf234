"""Times the 2 KiB classify call from Python and from JavaScript in
alternation with the Rust host's typed call, and writes the ratios per round.

Each host runs in its own process in serve mode (``host_call`` for Rust,
``bench/python_call.py --serve``, ``bench/js_call.mjs --serve``), which
answers a line ``N`` with the mean time of N calls. A round times one batch
of each host, back to back, in an order that rotates from round to round, and
keeps each dynamic host's time over the Rust host's: the speed of this
shared machine drifts between runs by more than the gaps being measured, and
within a round the batches run a few hundred milliseconds apart.

Usage: python3 bench/hosts_paired.py OUT_DIR RUST_CMD PYTHON_CMD JS_CMD
(each command one string, split on white space). Writes OUT_DIR/hosts_paired.json.
"""

import json
import os
import statistics
import subprocess
import sys
import time

ROUNDS = 21
WARM_ROUNDS = 3
BATCH_SECONDS = 0.25


class Host:
    def __init__(self, name, command):
        self.name = name
        self.proc = subprocess.Popen(command.split(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"{name}: expected 'ready', got {line!r} (exit {self.proc.poll()})")
        self.calls = 1

    def batch(self, n):
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: stopped (exit {self.proc.wait()})")
        return float(line)

    def calibrate(self):
        """Sets the calls per batch so that one batch takes about BATCH_SECONDS."""
        n = 16
        while True:
            t0 = time.perf_counter()
            self.batch(n)
            spent = time.perf_counter() - t0
            if spent >= BATCH_SECONDS / 4:
                self.calls = max(1, int(n * BATCH_SECONDS / spent))
                return
            n *= 4

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def quartiles(v):
    v = sorted(v)
    at = lambda q: v[(len(v) - 1) * q // 4]  # noqa: E731
    return {"median": at(2), "p25": at(1), "p75": at(3), "rounds": len(v)}


def main():
    out, rust_cmd, py_cmd, js_cmd = sys.argv[1:5]
    hosts = [Host("rust", rust_cmd), Host("python", py_cmd), Host("js", js_cmd)]
    try:
        for h in hosts:
            h.calibrate()
        ratios = {"python": [], "js": []}
        times = {h.name: [] for h in hosts}
        for r in range(WARM_ROUNDS + ROUNDS):
            order = hosts[r % 3:] + hosts[:r % 3]
            t = {h.name: h.batch(h.calls) for h in order}
            if r >= WARM_ROUNDS:
                for name in ratios:
                    ratios[name].append(t[name] / t["rust"])
                for name, ns in t.items():
                    times[name].append(ns)
    finally:
        for h in hosts:
            h.close()
    result = {
        "python_rust_2k": quartiles(ratios["python"]),
        "js_rust_2k": quartiles(ratios["js"]),
        "median_ns": {name: statistics.median(v) for name, v in times.items()},
        "calls_per_batch": {h.name: h.calls for h in hosts},
    }
    with open(os.path.join(out, "hosts_paired.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(f"hosts in alternation: Python / Rust host {result['python_rust_2k']['median']:.2f}x, "
          f"JavaScript / Rust host {result['js_rust_2k']['median']:.2f}x (median of {ROUNDS} rounds)")


if __name__ == "__main__":
    main()
