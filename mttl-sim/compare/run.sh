#!/usr/bin/env bash
# Compares mttl-sim with LogGOPSim, the reference it reproduces: finish
# times on schedules from LogGOPSim's schedgen, then speed on large ones.
#
# Needs LogGOPSim built beside the project, never inside it. From a clone of
# github.com/spcl/LogGOPSim (needs g++, gengetopt, re2c, libgraphviz-dev):
#   B=/tmp/lgs-build; S=LogGOPSim/src; mkdir -p $B; cd $B
#   cp $S/LogGOPSim/*.hpp $S/LogGOPSim/*.ggo $S/LogGOPSim/txt2bin.re $S/Schedgen/* .
#   for f in loggopsim txt2bin schedgen; do gengetopt -F ${f}_cmdline -i ${f}_cmdline.ggo; done
#   re2c -o txt2bin.cpp txt2bin.re
#   g++ -O2 -w -I/usr/include/graphviz -I. $S/LogGOPSim/LogGOPSim.cpp loggopsim_cmdline.c -o LogGOPSim -lcgraph
#   g++ -O2 -w txt2bin.cpp txt2bin_cmdline.c -o txt2bin
#   g++ -O2 -w buffer_element.cpp schedgen.cpp process_trace.cpp schedgen_cmdline.c -o schedgen
#
# Usage: LGS=/tmp/lgs-build mttl-sim/compare/run.sh [quick]
#   (after `cargo build --release -p mttl-sim`; work files go to $WORK,
#   /tmp/mttl-sim-compare by default). Exit status 1 if any time differs.
set -u
LGS=${LGS:-/tmp/lgs-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SIM=${SIM:-$ROOT/target/release/mttl-sim}
WORK=${WORK:-/tmp/mttl-sim-compare}
mkdir -p "$WORK"
for b in schedgen txt2bin LogGOPSim; do
  [ -x "$LGS/$b" ] || { echo "missing $LGS/$b (see the header of $0)"; exit 2; }
done
[ -x "$SIM" ] || { echo "missing $SIM: cargo build --release -p mttl-sim"; exit 2; }

# Parameter sets: LogGOPSim's defaults; a cheap-CPU fast network with per-byte
# overhead and a small eager limit; a slow NIC where every message is rendezvous.
PARAMS=(
  ""
  "-L 5000 -o 200 -g 100 -G 1 -O 2 -S 1024"
  "-L 700 -o 10 -g 3000 -G 20 -O 0 -S 0"
)
# Patterns, with the schedgen options that make them interesting. Left out:
# chained_dissem, whose schedules send to rank 9999999 (LogGOPSim crashes on
# them, mttl-sim rejects the line). schedgen's allreduce_ring leaves receives
# unmatched: both simulators must report that deadlock.
PATTERNS=(
  "binomialtreebcast" "binarytreebcast" "binomialtreereduce" "dissemination"
  "nwaydissemination --nway 3" "allreduce_recdoub" "allreduce_ring" "gather"
  "scatter" "linear_alltoall" "linear_alltoallv --a2av-skew-ratio 4" "linbarrier"
  "pipelinedring --segmentsize 1024" "pipelinedringdep --segmentsize 1024" "doublering"
  "random_bisect"
  "binomialtreebcast --nb 5000 --nb-poll 700" "dissemination --nb 20000 --nb-poll 3000"
)
SIZES=(1 100 4000 100000)
RANKS=(5 16 64)
[ "${1:-}" = quick ] && { SIZES=(100 100000); RANKS=(16); }

# One line per rank ("<rank> <time>") for <= 16 ranks, else "max <rank> <time>"
# (LogGOPSim prints every host only up to 16); "DEADLOCK" when operations are
# left unmatched (LogGOPSim then lists its non-empty queues, mttl-sim exits 2).
ref_times() {
  "$LGS/LogGOPSim" -f "$1" $2 | awk '/^Host/ {sub(":","",$2); print $2, $3}
    /^Maximum finishing time/ {sub(":","",$6); print "max", $6, $7}
    /contains/ {dead = 1} END {if (dead) print "DEADLOCK"}'
}
our_times() {
  local out rc
  if [ "$3" -le 16 ]; then
    out=$("$SIM" "$1" $2 2>/dev/null | awk '/^rank/ {sub(":","",$2); print $2, $3}'; exit "${PIPESTATUS[0]}")
  else
    out=$("$SIM" --summary "$1" $2 2>/dev/null | awk '/^max:/ {sub(")","",$5); print "max", $5, $2}'; exit "${PIPESTATUS[0]}")
  fi
  rc=$?
  if [ "$rc" -eq 2 ]; then echo DEADLOCK; else echo "$out"; fi
}

same=0; diff=0
for ptrn in "${PATTERNS[@]}"; do
  for n in "${RANKS[@]}"; do
    for d in "${SIZES[@]}"; do
      name=$(echo "$ptrn" | tr ' ' '_')_${n}_${d}
      goal=$WORK/$name.goal; bin=$WORK/$name.bin
      # shellcheck disable=SC2086
      "$LGS/schedgen" -p $ptrn -s "$n" -d "$d" -o "$goal" >/dev/null 2>&1 || { echo "schedgen failed: $ptrn"; continue; }
      "$LGS/txt2bin" -i "$goal" -o "$bin" >/dev/null 2>&1 || { echo "txt2bin failed: $name"; continue; }
      for p in "${PARAMS[@]}"; do
        a=$(ref_times "$bin" "$p"); b=$(our_times "$goal" "$p" "$n")
        if [ -n "$a" ] && [ "$a" = "$b" ]; then same=$((same + 1))
        else diff=$((diff + 1)); echo "DIFF $name [$p]"; diff <(echo "$a") <(echo "$b") | head -6; fi
      done
    done
  done
done
echo "finish times: $same runs identical, $diff differ"

# Speed: events per second on large schedules, same parameters. LogGOPSim
# reads its binary (made by txt2bin beforehand, not timed); mttl-sim reads
# GOAL text, so its whole-process time includes parsing; its event-loop
# rate is printed too.
speed() {
  local ptrn=$1 n=$2 d=$3
  local goal=$WORK/speed_${ptrn}_$n.goal bin=$WORK/speed_${ptrn}_$n.bin
  [ -f "$goal" ] || "$LGS/schedgen" -p "$ptrn" -s "$n" -d "$d" -o "$goal" >/dev/null 2>&1
  [ -f "$bin" ] || "$LGS/txt2bin" -i "$goal" -o "$bin" >/dev/null 2>&1
  local t0 t1 t2 ev ours_ev loop_rate
  t0=$(date +%s.%N); ev=$("$LGS/LogGOPSim" -b -f "$bin" | awk '/PERFORMANCE/ {print $5}')
  t1=$(date +%s.%N); out=$("$SIM" --summary "$goal" 2>&1 >/dev/null)
  t2=$(date +%s.%N)
  ours_ev=$(echo "$out" | awk '/^events:/ {print $2}')
  loop_rate=$(echo "$out" | awk '/^events:/ {gsub("\\(","",$6); print $6}')
  awk -v p="$ptrn" -v n="$n" -v e1="$ev" -v e2="$ours_ev" -v a="$t0" -v b="$t1" -v c="$t2" -v lr="$loop_rate" 'BEGIN {
    r1 = e1 / (b - a); r2 = e2 / (c - b);
    printf "%-16s %6d ranks: LogGOPSim %9d events %.2f s %.2e ev/s | mttl-sim %9d events %.2f s %.2e ev/s (event loop %.2e ev/s) | %.1fx\n",
      p, n, e1, b - a, r1, e2, c - b, r2, lr, r2 / r1 }'
}
if [ "${1:-}" != quick ]; then
  speed dissemination 32768 8
  speed binomialtreebcast 262144 8
  speed allreduce_recdoub 16384 8
  speed linear_alltoall 1024 8
fi
[ "$diff" -eq 0 ]
