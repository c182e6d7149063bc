# Session 12's closing H200 call, on a fresh machine: (1) Qwen2.5-7B start-up, bf16 first with an empty Triton
# cache, then FP8 (the kernels both share are cached by then); (2) GPU tests of the norm / activation kernels
# (the FP8 quantization fused in) and the FP8 file; (3) every workload on both shapes, bf16 and FP8, at the
# submitted head. Results packed into $OUT/final12.tgz as they come.
# Usage (device, repo root, fresh machine): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final12.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/final12
mkdir -p $R/startup $R/smoke
pack() { tar czf $OUT/final12.tgz -C $R .; }
timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup 2>&1 | grep -v -i warn | tail -1
timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --quantization fp8 --out $R/startup 2>&1 \
  | grep -v -i warn | tail -1
pack
timeout 200 python3 -m pytest -q tests/test_kernels.py tests/test_kernels_fp8.py -k "rmsnorm or silu or fp8 or quant" \
  2>&1 | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
for q in bf16 fp8; do
  a=""; [ $q = fp8 ] && a="--quantization fp8"
  timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b $a --tag _$q --out $R/smoke 2>&1 | f | tail -3 \
    | sed "s/^/$q /"
  pack
  timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b $a --tag _$q --out $R/smoke 2>&1 | f | tail -3 \
    | sed "s/^/$q /"
  pack
done
