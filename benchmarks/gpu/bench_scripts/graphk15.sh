# Session 15 (stop 21): which kernels of the engine's own batch-1 graph are slower in Qwen3-0.6B bs1's slow mode
# (graph_kernels.py). The reverted cuBLASLt picks (benchmarks/patches/cublaslt_picks.patch, applied to the device's
# copy) put every process in it (ltpicks_ab); without them ~1 process in 3-9 lands there. Alternating picks / none,
# ROUNDS rounds (default 3), each variant with its own kernel-choice cache. Packed into $OUT/graphk15.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/graphk15.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/graphk15
P=benchmarks/patches/cublaslt_picks.patch
mkdir -p $R
pack() { tar czf $OUT/graphk15.tgz -C $R .; }
apply() { git apply "$@" $P 2>/dev/null || patch -s -p1 $([ "$1" = -R ] && echo -R) < $P; }
for round in $(seq 1 ${ROUNDS:-3}); do
  for v in picks none; do
    [ $v = picks ] && apply
    export TACHYON_CACHE_DIR=/tmp/tcache_$v
    timeout 80 python3 benchmarks/gpu/graph_kernels.py --model qwen3-0.6b --runs 6 --out $R/gk_${v}_r$round.json 2>&1 | f \
      | grep "tok/s\|engine run\|framed\|Error\|error" | sed "s/^/$v r$round /" | tee -a $R/order.txt
    [ $v = picks ] && apply -R
    pack
  done
done
[ -f tachyon/kernels/blas.py ] && echo "the patch is still applied" || echo "the patch is reversed"
