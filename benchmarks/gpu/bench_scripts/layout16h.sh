# Session 16, after layout16g (a 256 KiB pad right after the decode graphs' capture still makes 0.6B bs1 slow, a
# 2 MiB one there does not): pads after the prefill graph runner's staging (--site prefill) and once the engine is
# built (--site ready: only what the warm-up and the runs allocate moves), against the post-capture pad again and a
# default build. One build per process.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16h.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16h
mkdir -p $R
pack() { tar czf $OUT/layout16h.tgz -C $R .; }
one() {  # site pad_kib
  timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $1 --pads $2 --runs 4 --out $R/l_$1_$2.json 2>&1 \
    | f | grep -E "pad |Error" | sed "s/^/$1 /" | tee -a $R/layout.txt
}
one load 0
for x in "after 256" "prefill 256" "ready 256" "prefill 768" "ready 768"; do one $x; pack; done
