#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target from ../tests/vectors.

    python3 fuzz/make_corpus.py      # from the repository root, or anywhere

corpus/classify     each classify input as JSON, and its free text alone
corpus/signature    each signature input: the detail, then NUL and the check
corpus/next_action  each next_action input and every story step, as JSON
corpus/config       each distinct config found in those states, and {}
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "tests", "vectors")
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    counts = {}
    configs = {"{}"}
    for fname in sorted(os.listdir(VECTORS)):
        if not fname.endswith(".json"):
            continue
        with open(os.path.join(VECTORS, fname)) as f:
            doc = json.load(f)
        fn = doc["function"]
        for case in doc["cases"]:
            cid = case["id"]
            if fn == "classify":
                write("classify", cid + ".json", json.dumps(case["input"]))
                text = case["input"].get("text")
                if text:
                    write("classify", cid + ".txt", text)
            elif fn == "signature":
                inp = case["input"]
                data = inp["detail"].encode("utf-8")
                if inp.get("check") is not None:
                    data += b"\0" + inp["check"].encode("utf-8")
                write("signature", cid, data)
            else:
                steps = case["steps"] if fn == "story" else [case]
                for i, step in enumerate(steps):
                    state = step["input"]
                    write("next_action", "%s-%d.json" % (cid, i), json.dumps(state))
                    if "config" in state:
                        configs.add(json.dumps(state["config"], sort_keys=True))
    for i, c in enumerate(sorted(configs)):
        write("config", "config-%03d.json" % i, c)
    for t in ("classify", "signature", "next_action", "config"):
        d = os.path.join(CORPUS, t)
        counts[t] = len(os.listdir(d)) if os.path.isdir(d) else 0
    print(" ".join("%s=%d" % kv for kv in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
