# A/B of the reverted cuBLASLt picks (stop 19; benchmarks/patches/cublaslt_picks.patch re-applies them to the device's
# copy of the tree) on Qwen3-0.6B bs1, where stop 19 saw every run with the picks in the ~2% slow mode and stop 20
# traced that mode to one ~2-ms stall per run. Per variant: `bench offline --repeats 5` (every run's throughput in the
# JSON) and bs1_steps.py --meter (where the longest step's time went: launch, GPU wait, host; thread CPU; GC).
# Alternating, two rounds; each variant keeps its own kernel-choice cache (TACHYON_CACHE_DIR). The patch is
# reversed at the end. Packed into $OUT/ltpicks_ab.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/ltpicks_ab.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/ltpicks_ab
P=benchmarks/patches/cublaslt_picks.patch
mkdir -p $R
pack() { tar czf $OUT/ltpicks_ab.tgz -C $R .; }
apply() { git apply "$@" $P 2>/dev/null || patch -s -p1 $([ "$1" = -R ] && echo -R) < $P; }
for round in 1 2; do
  for v in picks none; do
    [ $v = picks ] && apply
    export TACHYON_CACHE_DIR=/tmp/tcache_$v
    timeout 90 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 5 \
      --output $R/bs1_${v}_r$round.json 2>&1 | f | grep "runs:" | sed "s/^/$v r$round /" | tee -a $R/order.txt
    timeout 60 python3 benchmarks/gpu/bs1_steps.py --model qwen3-0.6b --runs 9 --meter --out $R/steps_${v}_r$round.json \
      2>&1 | f | grep " ms" | sed "s/^/$v r$round /" | tee -a $R/steps.txt
    [ $v = picks ] && apply -R
    pack
  done
done
[ -f tachyon/kernels/blas.py ] && echo "the patch is still applied" || echo "the patch is reversed"
