#!/usr/bin/env bash
# Regenerates the logs beside this script: each of scripts/*.py under torchrun, 2 CPU workers (gloo),
# output and errors as the train rule writes them (the stored ones: torch 2.13.0+cpu, run from /tmp/fl).
#   tests/data/failure_logs/generate.sh [path/to/torchrun]
set -u
here=$(cd "$(dirname "$0")" && pwd)
torchrun=${1:-torchrun}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
cd "$here/scripts"
run() { timeout 120 "$torchrun" --standalone --nproc_per_node 2 "$@"; }
for s in attr_rank0 fpe sysexit chained chained_implicit rank1_then_collective rank1_cleanup rank1_late keyboard; do
    run "$s.py" > "$here/$s.log" 2>&1
done
run --tee 3 --role trainer --log-dir "$(mktemp -d)" fpe.py > "$here/tee_role.log" 2>&1
# SIGTERM to torchrun's agent while its workers train (as a scheduler's preemption does).
timeout 120 "$torchrun" --standalone --nproc_per_node 2 sigterm.py > "$here/sigterm.log" 2>&1 &
sleep 12
kill -TERM $!  # timeout passes it on to torchrun
wait
