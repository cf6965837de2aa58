"""Compares the two sides of the DRA allocator differential test (run.sh, `make dra-difftest`).

    cmp.py DIR [SHOW]

For every DIR/CASE.in.json, CASE.go.json (upstream Go) and CASE.rust.json (sched-dra) must hold the
same result: the same devices per claim and request in the same order, the same node selectors and
configs, the same error or "no allocation", and the same number of search steps (`calls`). Share IDs
are random UUIDs on both sides and are masked; empty and null fields are dropped. A case whose Go
side ran out of time (an error ending in "context deadline exceeded", or a CASE.go.timeout marker
left by run.sh) is counted as a Go timeout and not compared. A missing or unreadable output of either
side (it failed) is a difference.

Prints the differing case files (the first SHOW of them with both results, default 5) and one
summary line; exits 1 when any case differs.
"""
import glob
import json
import os
import sys


def norm(o):
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if k == "shareID":
                v = "<share>"
            v = norm(v)
            if v in (None, [], {}) and k not in ("results",):
                continue
            out[k] = v
        return out
    if isinstance(o, list):
        return [norm(x) for x in o]
    return o


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: cmp.py DIR [SHOW]")
    d = sys.argv[1]
    show = int(sys.argv[2]) if len(sys.argv) == 3 else 5
    cases = identical = timeouts = 0
    differ = []
    for inp in sorted(glob.glob(os.path.join(d, "*.in.json"))):
        cases += 1
        base = inp[: -len(".in.json")]
        go = load(base + ".go.json")
        if os.path.exists(base + ".go.timeout") or (
            go is not None and "context deadline exceeded" in (go.get("error") or "")
        ):
            timeouts += 1
            continue
        rs = load(base + ".rust.json")
        # Go prints "results": null next to an error or when nothing could be allocated.
        gn = {k: v for k, v in go.items() if not (k == "results" and v is None)} if go else None
        if gn is not None and rs is not None and norm(gn) == norm(rs):
            identical += 1
            continue
        differ.append(inp)
        print("DIFFERS", inp)
        if len(differ) <= show:
            print("  go:  ", json.dumps(norm(gn))[:2000] if gn is not None else "(no output)")
            print("  rust:", json.dumps(norm(rs))[:2000] if rs is not None else "(no output)")
    print(f"{cases} cases, {identical} identical, {len(differ)} differ, {timeouts} Go timeouts")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
