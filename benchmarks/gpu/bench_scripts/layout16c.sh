# Session 16, after layout16b (small-pool pads: the slow mode follows the pad, the same in two processes, but also
# the builds before it): one build per process (no history), a pad of P KiB at one allocation site (layout_probe.py
# --site): before the load (moves every small buffer), before the runner's device token buffer (moves it and the
# later small buffers, not the norm weights), before the decode graph runner (moves only its small buffers and the
# later ones). Which group's offset sets the mode?
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16c.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16c
mkdir -p $R
pack() { tar czf $OUT/layout16c.tgz -C $R .; }
one() {  # site pad_kib
  timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $1 --pads $2 --runs 4 --out $R/l_${1}_$2.json 2>&1 \
    | f | grep -E "pad |Error" | sed "s/^/$1 /" | tee -a $R/layout.txt
}
one load 0
for pad in ${PADS:-256 512 768 1024 1536}; do
  for site in load tokens graphs; do
    one $site $pad
  done
  pack
done
one load 0
pack
