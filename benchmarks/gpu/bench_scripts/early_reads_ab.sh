# One H200 call: the reads moved above the PDL wait (this tree) against the tree before them (under $OLD),
# decode-step replays alternating, Qwen2.5-7B (2 rounds) and Qwen3-0.6B; GPU tests of the changed kernels;
# the engine's bs1 on both shapes. Results straight under $OUT (a call cut short keeps what finished).
# Usage (device, repo root): OLD=old TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/early_reads_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
ab() {  # shape round
  timeout 70 python3 benchmarks/gpu/step_ab.py --shapes $1 --rounds 1 --variants auto --out $OUT/new_$1_$2 2>&1 \
    | grep -v -i warn | tail -1 | sed 's/^/new /'
  (cd $OLD && PYTHONPATH=/tmp/site:$PWD timeout 70 python3 benchmarks/gpu/step_ab.py --shapes $1 --rounds 1 \
    --variants auto --out $OUT/old_$1_$2 2>&1 | grep -v -i warn | tail -1 | sed 's/^/old /')
}
ab qwen2.5-7b 0
ab qwen3-0.6b 0
timeout 90 python3 -m pytest -q tests/test_kernels.py tests/test_kernels_fused.py 2>&1 | tail -2 | tee $OUT/gpu_tests.txt
ab qwen2.5-7b 1
mkdir -p $OUT/smoke
timeout 60 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1 --out $OUT/smoke 2>&1 \
  | grep -v -i warn | tail -2
timeout 40 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --out $OUT/smoke 2>&1 \
  | grep -v -i warn | tail -2
