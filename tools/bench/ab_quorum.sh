#!/usr/bin/env bash
# A/B of tools/bench/quorum.py between two checkouts (e.g. git worktrees of two commits),
# alternated round by round on the same host so both sides see the same noise:
#   tools/bench/ab_quorum.sh DIR_A DIR_B [ROUNDS]
# (AB_OPS1, AB_OPSN and AB_CONCURRENCY override the records per run at 1 and at 64
# outstanding, default 1000 and 10000, and the levels, default 1,64: longer runs resolve
# CPU per record finer, /proc counts 10 ms ticks)
# Prints each run's rows (JSON) and the medians per side with the ratio B/A: p50 latency,
# records/s, and server CPU per committed record (the three nodes' CPU seconds / records,
# far less sensitive to other people's load than the two others); "other load" is the
# median number of cores busy with work that was not the bench's during the runs.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 DIR_A DIR_B [ROUNDS]" >&2; exit 2; fi
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); ROUNDS=${3:-9}
PY=${PYTHON:-$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/python}
OUT=$(mktemp)
for round in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    dir=$A; [ "$side" = B ] && dir=$B
    # a checkout whose bench runs extra rows by default: not in an A/B
    extra=()
    grep -q -- '--skip-raft-workload' "$dir/tools/bench/quorum.py" && extra=(--baseline none --skip-raft-workload)
    echo "== round $round side $side" | tee -a "$OUT"
    (cd "$dir" && PYTHONPATH=$dir timeout 600 "$PY" tools/bench/quorum.py --skip-anchors --skip-physical \
        --ops1 "${AB_OPS1:-1000}" --opsn "${AB_OPSN:-10000}" --concurrency "${AB_CONCURRENCY:-1,64}" \
        --repeats 1 "${extra[@]}" --json 2>/dev/null \
        | grep '"kind": "row"' | tee -a "$OUT")
  done
done
"$PY" - "$OUT" <<'PY'
import json, statistics as st, sys
side, rows = None, {"A": {}, "B": {}}
for line in open(sys.argv[1]):
    if line.startswith("== round"):
        side = line.split()[4]
    elif line.startswith("{"):
        r = json.loads(line)
        rows[side].setdefault(r["concurrency"], []).append(r)
def cpu_us(r):
    """Server CPU per committed record (us): the three servers' cores x seconds / records."""
    run = r["runs"][0]
    srv = sum(x for x in run["cpu_cores"]["servers"] if x is not None)
    return srv / r["ops_per_s"] * 1e6 if r["ops_per_s"] else float("nan")
def noise(r):
    return r["runs"][0]["cpu_cores"].get("other") or 0.0
med = {s: {c: (st.median(x["p50_ms"] for x in rs), st.median(x["ops_per_s"] for x in rs),
               st.median(cpu_us(x) for x in rs), st.median(noise(x) for x in rs))
           for c, rs in by_c.items()} for s, by_c in rows.items()}
for c in sorted(med["A"]):
    (pa, ra, ca, na), (pb, rb, cb, nb) = med["A"][c], med["B"][c]
    print(f"{c:>3} outstanding: p50 A {pa:.3f} ms B {pb:.3f} ms (B/A {pb / pa:.3f}); "
          f"records/s A {ra:,.0f} B {rb:,.0f} (B/A {rb / ra:.3f}); "
          f"server CPU/record A {ca:,.1f} us B {cb:,.1f} us (B/A {cb / ca:.3f}); "
          f"other load A {na:.2f} B {nb:.2f} cores; {len(rows['A'][c])} runs per side")
PY
rm -f "$OUT"
