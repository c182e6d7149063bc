# Session 16, after layout16f (pinning the named small buffers does not stop the slow mode): is it the decode graphs'
# pool? Pads right before the decode graphs' capture (2 MiB and 64 MiB: large-pool blocks that need new segments, so
# the graph pool's segments come after them; 256 KiB: small pool) against the same pads right after the capture
# (a control: nothing of the step moves), one build per process, plus a default build.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16g.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16g
mkdir -p $R
pack() { tar czf $OUT/layout16g.tgz -C $R .; }
one() {  # site pad_kib
  timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $1 --pads $2 --runs 4 --out $R/l_$1_$2.json 2>&1 \
    | f | grep -E "pad |Error" | sed "s/^/$1 /" | tee -a $R/layout.txt
}
one load 0
for x in "capture 2048" "after 2048" "capture 65536" "after 65536" "capture 256" "after 256"; do one $x; pack; done
