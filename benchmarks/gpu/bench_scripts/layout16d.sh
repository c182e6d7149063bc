# Session 16, after layout16c (one build per process: any small-pool pad before the decode graph runner, which moves
# only its small buffers and the split-KV inline merge's counters, makes 0.6B bs1 slow; no pad, fast): is it the
# inline merge's counters? Three variants, pads 0 / 256 / 512 / 768 KiB at that site, one build per process:
# default (8 KV heads' counters packed in 32 bytes), TACHYON_COUNTER_STRIDE=32 (one 128-byte line per counter),
# TACHYON_DECODE_MERGE=kernel (no counters: the merge kernel).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16d.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16d
mkdir -p $R
pack() { tar czf $OUT/layout16d.tgz -C $R .; }
one() {  # variant pad_kib [env...]
  v=$1 pad=$2
  shift 2
  env "$@" timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site graphs --pads $pad --runs 4 \
    --out $R/l_${v}_$pad.json 2>&1 | f | grep -E "pad |Error" | sed "s/^/$v /" | tee -a $R/layout.txt
}
for pad in ${PADS:-0 256 512 768}; do
  one default $pad
  one stride32 $pad TACHYON_COUNTER_STRIDE=32
  one mergekernel $pad TACHYON_DECODE_MERGE=kernel
  pack
done
