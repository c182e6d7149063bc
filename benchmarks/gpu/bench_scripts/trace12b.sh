# Session 12, call 3: after the column-parallel silu_and_mul_quant and the dropped scale fills: the FP8 step
# trace (auto against the unfused pair, fq=0) on both shapes, then FP8 every workload (7B) and bs1 (0.6B).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/trace12b.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/trace12b
mkdir -p $R/7b $R/06b $R/smoke
pack() { tar czf $OUT/trace12b.tgz -C $R .; }
timeout 120 python3 -m pytest -q tests/test_kernels_fp8.py 2>&1 | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
timeout 150 python3 benchmarks/gpu/step_trace.py --shape qwen2.5-7b --quantization fp8 --batches 1,8 \
  --variants "auto,fq=0,auto" --out $R/7b 2>&1 | grep -v -i warn | grep "us/step"
pack
timeout 100 python3 benchmarks/gpu/step_trace.py --shape qwen3-0.6b --quantization fp8 --batches 1,8 \
  --variants "auto,fq=0,auto" --out $R/06b 2>&1 | grep -v -i warn | grep "us/step"
pack
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --quantization fp8 --tag _fp8 --out $R/smoke \
  2>&1 | f | tail -3 | sed "s/^/fp8 /"
pack
timeout 60 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --quantization fp8 --tag _fp8 \
  --out $R/smoke 2>&1 | f | tail -1 | sed "s/^/fp8 /"
pack
