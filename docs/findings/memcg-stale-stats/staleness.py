#!/usr/bin/env python3
"""How old were the memcg statistics each throttle decision read?

Reads tracefs text (a `trace` file, or the `trace-events` file inside a
wbstall `<boot>.results.bin`) with the events `writeback:balance_dirty_pages`
and `memcg:memcg_flush_stats`, and prints, over the throttle calls of the
writers' cgroup, the age of the statistics at each call:

- `flush age`: time since the last flush that covered the writers' memcg
  (a `memcg_flush_stats` of the root, or of the writers' memcg, with
  `force=1` or `needs_flush=1`: those flush; the others are skipped);
- `known age`: the same, but a skipped check of the writers' memcg
  (`needs_flush=0`) also counts: then fewer updates than the flushing
  threshold were pending, so the counts were within it of the truth.

Each over all calls and over the calls that saw the memcg over its limit
(`dirty > limit`, `task_ratelimit=0`): the calls a stale count can hold.

And the flushes' cost: the flushes of the writers' memcg and of the root a
second of trace, and, with `cgroup:cgroup_rstat_locked`/`unlock` traced, the
time under the rstat lock a second (each CPU's locked-to-unlock pairs).

Usage: staleness.py FILE...   (trace text or *.results.bin)
The writers' memcg id is the one non-root id in the flush events, or
--memcg-id N. Exit 2 on input without the events it needs.
"""

import argparse
import re
import sys

BDP = re.compile(
    r"\s(\d+\.\d+): balance_dirty_pages: .*?limit=(\d+) .*?\sdirty=(\d+) "
    r".*?task_ratelimit=(\d+) .*?cgroup_ino=(\d+)"
)
RSTAT = re.compile(r"\[(\d+)\].*?\s(\d+\.\d+): cgroup_rstat_(locked|unlock):")
FLUSH = re.compile(
    r"\s(\d+\.\d+): memcg_flush_stats: memcg_id=(\d+) stats_updates=\d+ "
    r"force=(\d) needs_flush=(\d)"
)


def trace_text(path):
    data = open(path, "rb").read()
    if not data.startswith(b"WBSTALL-FILE "):
        return data.decode("utf-8", "replace")
    pos = 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        header = data[pos:nl].decode()
        pos = nl + 1
        if header.startswith("WBSTALL-END"):
            break
        _, name, length = header.split(" ")
        body = data[pos : pos + int(length)]
        pos += int(length) + 1
        if name == "trace-events":
            return body.decode("utf-8", "replace")
    sys.exit(f"{path}: no trace-events file in the stream")


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary(name, ages):
    if not ages:
        return f"{name}: no calls"
    ms = [a * 1000 for a in ages]
    return (
        f"{name}: {len(ms)} calls, median {pct(ms, 0.5):.0f} ms, "
        f"p99 {pct(ms, 0.99):.0f} ms, max {max(ms):.0f} ms"
    )


def analyse(path, memcg_id):
    flushes, bdps = [], []
    locked, held, first, last = {}, 0.0, None, None
    for line in trace_text(path).splitlines():
        m = RSTAT.search(line)
        if m:
            cpu, t, what = m.group(1), float(m.group(2)), m.group(3)
            if what == "locked":
                locked[cpu] = t
            elif cpu in locked:
                held += t - locked.pop(cpu)
        m = re.search(r"\s(\d+\.\d+): \w+:", line)
        if m:
            t = float(m.group(1))
            first = t if first is None else first
            last = t
        m = FLUSH.search(line)
        if m:
            t, mid, force, needs = m.groups()
            flushes.append((float(t), int(mid), force == "1" or needs == "1"))
            continue
        m = BDP.search(line)
        if m:
            t, limit, dirty, ratelimit, ino = m.groups()
            over = int(dirty) > int(limit) and ratelimit == "0"
            bdps.append((float(t), int(ino), over))
    if not flushes or not bdps:
        sys.exit(
            f"{path}: {len(flushes)} memcg_flush_stats and {len(bdps)} "
            "balance_dirty_pages events: trace both (memcg/memcg_flush_stats)"
        )
    ids = {mid for _, mid, _ in flushes if mid != 1}
    if memcg_id is None:
        if len(ids) != 1:
            sys.exit(f"{path}: non-root memcg ids {sorted(ids)}: give --memcg-id")
        memcg_id = ids.pop()
    inos = {ino for _, ino, _ in bdps if ino != 1}
    if len(inos) != 1:
        sys.exit(f"{path}: throttled cgroups {sorted(inos)}: expected one besides the root")
    ino = inos.pop()
    events = sorted(
        [(t, 0, mid, flushed) for t, mid, flushed in flushes]
        + [(t, 1, i, over) for t, i, over in bdps if i == ino]
    )
    last_flush = last_known = None
    flush_all, flush_over, known_all, known_over = [], [], [], []
    for t, kind, who, flag in events:
        if kind == 0:
            if who not in (1, memcg_id):
                continue
            if flag:
                last_flush = last_known = t
            elif who == memcg_id:
                last_known = t
            continue
        if last_flush is None:
            continue
        flush_all.append(t - last_flush)
        known_all.append(t - last_known)
        if flag:
            flush_over.append(t - last_flush)
            known_over.append(t - last_known)
    print(f"{path} (memcg_id={memcg_id}, cgroup_ino={ino})")
    print("  " + summary("flush age, all calls", flush_all))
    print("  " + summary("flush age, over the limit", flush_over))
    print("  " + summary("known age, all calls", known_all))
    print("  " + summary("known age, over the limit", known_over))
    span = last - first
    own = sum(1 for _, mid, f in flushes if f and mid == memcg_id)
    root = sum(1 for _, mid, f in flushes if f and mid == 1)
    print(
        f"  flushes: writers' memcg {own} ({own / span:.2f}/s), root {root}, "
        f"over {span:.1f} s; under the rstat lock {1000 * held / span:.3f} ms/s"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--memcg-id", type=int)
    args = ap.parse_args()
    for f in args.files:
        analyse(f, args.memcg_id)


if __name__ == "__main__":
    main()
