#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks .github/workflows/matrix.yml, which cannot run here: it must parse as
YAML, have the shape GitHub Actions wants (on, jobs with runs-on and steps,
each step a `uses` or a `run`), every action must be pinned to a full commit
SHA with its tag in a comment (`uses: owner/repo@<40 hex> # v1.2.3`: a tag can
be moved, a commit cannot), the kernel source must be given a Debian mirror
(WBSTALL_DEBIAN_MIRROR: a runner's apt sources name none), and its shards must
agree: the matrix lists 1..SHARDS, the shard step passes --shard I/SHARDS and a
--clock (merged shards must share it), and the merge job needs the shard job
and runs `cargo xtask merge` whatever the shards' exits (`if: !cancelled()`:
a crashed kernel fails its shard, and the merge is where it is reported),
writing the job summary ($GITHUB_STEP_SUMMARY) in a step that runs `if:
always()`. The shard job's results and the kernels job's build logs
(target/wbstall/logs) are uploaded `if: always()` (a failing shard's or
build's evidence), a shard installs only a boot's tools
(`deps --install --boot`: the kernels come built), and no cache key names the run (a new
copy every run, never found again). actionlint checks the rest (`cargo xtask
ci`). Exits 1 naming every problem."""

import re
import sys

import yaml

# owner/repo[/path]@<full commit SHA>; local (./) and docker:// actions aside.
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
# The raw line of a `uses:`, for its `# vX` comment (YAML drops comments).
USES_LINE = re.compile(r"^\s*(-\s+)?uses:\s*(\S+)\s*(#\s*(\S+))?")

path = sys.argv[1] if len(sys.argv) > 1 else ".github/workflows/matrix.yml"
with open(path) as f:
    text = f.read()
wf = yaml.safe_load(text)

problems = []
for n, line in enumerate(text.splitlines(), 1):
    m = USES_LINE.match(line)
    if not m or m.group(2).startswith(("./", "docker://")):
        continue
    if not PINNED.match(m.group(2)):
        problems.append(
            f"line {n}: `{m.group(2)}` is not pinned to a full commit SHA "
            "(uses: owner/repo@<40 hex> # vX.Y.Z; `git ls-remote` the tag for it)"
        )
    elif not (m.group(4) or "").startswith("v"):
        problems.append(f"line {n}: `{m.group(2)}` has no `# vX.Y.Z` comment naming its tag")
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
# A step's run line with the values of its env (where `${{ }}` is better passed).
runs = " ".join(
    s.get("run", "") + " " + " ".join(str(v) for v in (s.get("env") or {}).values())
    for s in shard.get("steps") or []
)
if "--shard" not in runs or "matrix.shard" not in runs or "env.SHARDS" not in runs:
    problems.append("the shard job does not run qemu-test --shard <matrix.shard>/<SHARDS>")
if "deps --install" in runs and "deps --install --boot" not in runs:
    problems.append(
        "the shard job installs the kernels' compilers (`deps --install`): a shard only "
        "boots what the kernels job built (`cargo xtask deps --install --boot`)"
    )
if "--clock" not in runs:
    problems.append("the shard job does not give qemu-test a --clock (merged shards share one)")
kernels = jobs.get("kernels", {})
mirror_env = {**(wf.get("env") or {}), **(kernels.get("env") or {})}
if "WBSTALL_DEBIAN_MIRROR" not in mirror_env:
    problems.append("the kernels job has no WBSTALL_DEBIAN_MIRROR (a runner has no Debian mirror)")
uploads = [s for s in shard.get("steps") or [] if "upload-artifact" in str(s.get("uses", ""))]
if not uploads:
    problems.append("the shard job uploads no results (actions/upload-artifact)")
for s in uploads:
    if "always()" not in str(s.get("if", "")):
        problems.append(
            "the shard job's upload of its results has no `if: always()`: a failing "
            "shard's evidence would be lost"
        )
for name, job in jobs.items():
    for s in job.get("steps") or []:
        key = str((s.get("with") or {}).get("key", ""))
        if "github.run_id" in key or "github.run_attempt" in key:
            problems.append(
                f"job {name}: the cache key `{key}` names the run: every run saves a new "
                "copy that no later run finds by key (key it by its content)"
            )
logs = [
    s for s in kernels.get("steps") or []
    if "upload-artifact" in str(s.get("uses", ""))
    and "target/wbstall/logs" in str((s.get("with") or {}).get("path", ""))
]
if not logs:
    problems.append(
        "the kernels job does not upload its build logs (target/wbstall/logs): a failed "
        "build would leave nothing to read"
    )
for s in logs:
    if "always()" not in str(s.get("if", "")):
        problems.append(
            "the kernels job's upload of its build logs has no `if: always()`: a failed "
            "build's log would be lost"
        )
merge = jobs.get("merge", {})
needs = merge.get("needs")
if "shard" not in ([needs] if isinstance(needs, str) else needs or []):
    problems.append("the merge job does not wait for the shard job")
if "!cancelled()" not in str(merge.get("if", "")) and "always()" not in str(merge.get("if", "")):
    problems.append(
        "the merge job has no `if: ${{ !cancelled() }}`: a shard whose kernel crashed fails, "
        "and the merged report that names the crash would never be made"
    )
if "cargo xtask merge" not in " ".join(s.get("run", "") for s in merge.get("steps") or []):
    problems.append("the merge job does not run cargo xtask merge")
summaries = [s for s in merge.get("steps") or [] if "GITHUB_STEP_SUMMARY" in s.get("run", "")]
if not summaries:
    problems.append("the merge job writes no job summary ($GITHUB_STEP_SUMMARY)")
for s in summaries:
    if "always()" not in str(s.get("if", "")):
        problems.append(
            "the merge job's summary step has no `if: always()`: a merge that refused the "
            "shards would say nothing"
        )

for p in problems:
    print(f"{path}: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
