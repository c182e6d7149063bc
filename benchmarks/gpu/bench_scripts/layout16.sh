# Session 16: is Qwen3-0.6B bs1's slow mode set by buffer placement? layout_probe.py builds the acceptance engine 8
# times per process, each after holding a pad of P MiB on the device (0, 1, 2, 3, 5, 8, 64, 1024), and times batch-1
# runs on each build. Four processes, alternating: plain, with the reverted cuBLASLt picks (every process slow in
# session 15: 11 of 11), plain, picks. Each variant has its own kernel-choice cache.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16
P=benchmarks/patches/cublaslt_picks.patch
mkdir -p $R
pack() { tar czf $OUT/layout16.tgz -C $R .; }
apply() { git apply "$@" $P 2>/dev/null || patch -s -p1 $([ "$1" = -R ] && echo -R) < $P; }
for p in 1 2; do
  for v in plain picks; do
    [ $v = picks ] && apply
    export TACHYON_CACHE_DIR=/tmp/tcache_$v
    echo "== $v p$p $(date +%T)" | tee -a $R/layout.txt
    timeout ${TMO:-150} python3 benchmarks/gpu/layout_probe.py --pads ${PADS:-0,1,2,3,5,8,64,1024} --runs 4 \
      --out $R/layout_${v}_p$p.json 2>&1 | f | grep "pad " | tee -a $R/layout.txt
    [ $v = picks ] && apply -R
    pack
  done
done
[ -f tachyon/kernels/blas.py ] && echo "the patch is still applied" || echo "the patch is reversed"
