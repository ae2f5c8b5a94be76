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
# them, mttl-sim rejects the line). Schedules LogGOPSim cannot run and
# mttl-sim rejects (allreduce_recdoub on 5 ranks names rank 5) count as
# "invalid for both"; schedgen's allreduce_ring leaves receives unmatched,
# and both simulators must report that deadlock.
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
    /contains/ {dead = 1} /^(Host|Maximum)/ {ok = 1}
    END {if (dead) print "DEADLOCK"; else if (!ok) print "INVALID"}'
}
our_times() {
  local out rc
  if [ "$3" -le 16 ]; then
    out=$("$SIM" "$1" $2 2>/dev/null | awk '/^rank/ {sub(":","",$2); print $2, $3}'; exit "${PIPESTATUS[0]}")
  else
    out=$("$SIM" --summary "$1" $2 2>/dev/null | awk '/^max:/ {sub(")","",$5); print "max", $5, $2}'; exit "${PIPESTATUS[0]}")
  fi
  rc=$?
  case $rc in 2) echo DEADLOCK ;; 1) echo INVALID ;; *) echo "$out" ;; esac
}

same=0; diff=0; rejected=0
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
        if [ "$a" = INVALID ] && [ "$b" = INVALID ]; then rejected=$((rejected + 1))
        elif [ -n "$a" ] && [ "$a" = "$b" ]; then same=$((same + 1))
        else diff=$((diff + 1)); echo "DIFF $name [$p]"; diff <(echo "$a") <(echo "$b") | head -6; fi
      done
    done
  done
done
echo "finish times: $same runs identical, $diff differ, $rejected schedules invalid for both"

# Speed: events per second of CPU time (user + system; the machine may be
# shared, so wall-clock time is not used) on large schedules, same
# parameters. LogGOPSim reads its binary (made by txt2bin beforehand, not
# counted); mttl-sim reads GOAL text, so its figure includes parsing. Both
# count events the same way (operations issued plus messages sent).
cpu_seconds() { # command... -> prints "user+sys" seconds; output to $WORK/out
  local TIMEFORMAT='%U %S'
  { time "$@" >"$WORK/out" 2>&1; } 2>"$WORK/time"
  awk '{print $1 + $2}' "$WORK/time"
}
speed() {
  local ptrn=$1 n=$2 d=$3
  local goal=$WORK/speed_${ptrn}_$n.goal bin=$WORK/speed_${ptrn}_$n.bin
  [ -f "$goal" ] || "$LGS/schedgen" -p "$ptrn" -s "$n" -d "$d" -o "$goal" >/dev/null 2>&1
  [ -f "$bin" ] || "$LGS/txt2bin" -i "$goal" -o "$bin" >/dev/null 2>&1
  local t1 t2 e1 e2 m1 m2
  t1=$(cpu_seconds "$LGS/LogGOPSim" -b -f "$bin")
  e1=$(awk '/PERFORMANCE/ {print $5}' "$WORK/out")
  m1=$(awk '/^Maximum/ {print $7} /contains/ {d = 1} END {if (d) print "deadlock"}' "$WORK/out")
  t2=$(cpu_seconds "$SIM" --summary "$goal")
  e2=$(awk '/^events:/ {print $2}' "$WORK/out")
  m2=$(awk '/^max:/ {print $2} /deadlock/ {print "deadlock"}' "$WORK/out")
  awk -v p="$ptrn" -v n="$n" -v e1="$e1" -v e2="$e2" -v t1="$t1" -v t2="$t2" -v m1="$m1" -v m2="$m2" 'BEGIN {
    printf "%-17s %6d ranks (max %s / %s): LogGOPSim %8d events %6.2f s %.2e ev/s | mttl-sim %8d events %6.2f s %.2e ev/s | %.1fx\n",
      p, n, m1, m2, e1, t1, e1 / t1, e2, t2, e2 / t2, (e2 / t2) / (e1 / t1) }'
}
if [ "${1:-}" != quick ]; then
  speed dissemination 32768 8
  speed dissemination 131072 8
  speed binomialtreebcast 262144 8
  speed binarytreebcast 32768 8
  speed linear_alltoall 256 8
fi
[ "$diff" -eq 0 ]
