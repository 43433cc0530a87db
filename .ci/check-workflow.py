#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks .github/workflows/matrix.yml, which cannot run here: it must parse as
YAML, have the shape GitHub Actions wants (on, jobs with runs-on and steps,
each step a `uses` or a `run`), and its shards must agree: the matrix lists
1..SHARDS, the shard step passes --shard I/SHARDS, and the merge job needs the
shard job and runs `cargo xtask merge`. Exits 1 naming every problem."""

import sys

import yaml

path = sys.argv[1] if len(sys.argv) > 1 else ".github/workflows/matrix.yml"
with open(path) as f:
    wf = yaml.safe_load(f)

problems = []
# YAML 1.1 reads a bare `on` key as True.
on = wf.get("on", wf.get(True))
if not on:
    problems.append("no `on:` trigger")
jobs = wf.get("jobs") or {}
if not jobs:
    problems.append("no jobs")
for name, job in jobs.items():
    if "runs-on" not in job:
        problems.append(f"job {name}: no runs-on")
    for i, step in enumerate(job.get("steps") or []):
        if ("uses" in step) == ("run" in step):
            problems.append(f"job {name} step {i + 1}: needs exactly one of uses/run")
        uses = step.get("uses", "")
        if uses and "@" not in uses:
            problems.append(f"job {name} step {i + 1}: `{uses}` is not pinned to a version")
    needs = job.get("needs")
    for n in [needs] if isinstance(needs, str) else needs or []:
        if n not in jobs:
            problems.append(f"job {name} needs unknown job {n}")

shards = int((wf.get("env") or {}).get("SHARDS", 0))
if shards < 1:
    problems.append("env.SHARDS is not a positive number")
shard = jobs.get("shard", {})
matrix = ((shard.get("strategy") or {}).get("matrix") or {}).get("shard")
if matrix != list(range(1, shards + 1)):
    problems.append(f"the shard matrix is {matrix}, not 1..{shards}")
runs = " ".join(s.get("run", "") for s in shard.get("steps") or [])
if "--shard" not in runs or "matrix.shard" not in runs or "env.SHARDS" not in runs:
    problems.append("the shard job does not run qemu-test --shard <matrix.shard>/<SHARDS>")
merge = jobs.get("merge", {})
if merge.get("needs") != "shard":
    problems.append("the merge job does not wait for the shard job")
if "cargo xtask merge" not in " ".join(s.get("run", "") for s in merge.get("steps") or []):
    problems.append("the merge job does not run cargo xtask merge")

for p in problems:
    print(f"{path}: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
