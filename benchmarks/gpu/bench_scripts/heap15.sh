# Session 15 (stop 21), first probe call after ltpicks_ab:
# 1. The frozen heap (engine.heap; the bench's Tachyon backend now freezes after its load) against the heap as before
#    (bs1_steps.py --no-freeze), Qwen3-0.6B bs1, alternating processes: do the first run's 2.2-2.4 ms of collections
#    go away, and do the steady runs change?
# 2. Why the reverted cuBLASLt picks make every 0.6B batch-1 step ~12 us slower (ltpicks_ab: median gap 0.667 against
#    0.655 ms in 4 of 4 processes): step_trace.py's per-kernel contributions of the bs1 decode graph with the picks,
#    with the patch applied but TACHYON_BLAS_PICK=0, and without the patch; each with its own kernel-choice cache,
#    copied out so the tuned choices can be compared.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/heap15.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/heap15
P=benchmarks/patches/cublaslt_picks.patch
mkdir -p $R
pack() { tar czf $OUT/heap15.tgz -C $R .; }
apply() { git apply "$@" $P 2>/dev/null || patch -s -p1 $([ "$1" = -R ] && echo -R) < $P; }
for p in 1 2; do
  for v in frozen unfrozen; do
    flag=""
    [ $v = unfrozen ] && flag=--no-freeze
    timeout 70 python3 benchmarks/gpu/bs1_steps.py --model qwen3-0.6b --runs 6 $flag --out $R/steps_${v}_p$p.json \
      2>&1 | f | grep " ms" | sed "s/^/$v p$p /" | tee -a $R/steps.txt
    pack
  done
done
for v in picks picks_off none; do
  [ $v != none ] && apply
  export TACHYON_CACHE_DIR=/tmp/tcache_$v
  [ $v = picks_off ] && export TACHYON_BLAS_PICK=0
  timeout 100 python3 benchmarks/gpu/step_trace.py --out $R/trace_$v --shape qwen3-0.6b --batches 1 --replays 20 \
    --max-model-len 40960 2>&1 | f | grep "us/step\|choices" | sed "s/^/$v /" | tee -a $R/trace.txt
  unset TACHYON_BLAS_PICK
  cp -r /tmp/tcache_$v $R/ 2>/dev/null
  [ $v != none ] && apply -R
  pack
done
[ -f tachyon/kernels/blas.py ] && echo "the patch is still applied" || echo "the patch is reversed"
