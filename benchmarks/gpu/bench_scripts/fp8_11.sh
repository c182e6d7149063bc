# Session 11: the opt-in FP8 W8A8 path (quantization="fp8") on the H200. (1) its GPU kernel tests, (2) Qwen2.5-7B
# every workload FP8 and, in the same call, nano256 in bf16 (the baseline it is compared with), with nvidia-smi
# sampling power and clocks at 100 ms, (3) nano256 FP8 with cuBLASLt's fast accumulation, (4) Qwen3-0.6B FP8.
# Results packed into $OUT/fp8_11.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/fp8_11.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/fp8_11
mkdir -p $R/smoke
pack() { tar czf $OUT/fp8_11.tgz -C $R .; }
timeout 150 python3 -m pytest -q tests/test_kernels_fp8.py 2>&1 | tail -2 | tee $R/gpu_tests.txt
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active --format=csv \
  -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --quantization fp8 --tag _fp8 --out $R/smoke \
  2>&1 | f | tail -4
pack
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads nano256 --tag _bf16 --out $R/smoke \
  2>&1 | f | tail -1
pack
TACHYON_FP8_FAST_ACCUM=1 timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads nano256 \
  --quantization fp8 --tag _fp8_fastaccum --out $R/smoke 2>&1 | f | tail -1
kill $SMI
pack
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --quantization fp8 --tag _fp8 --out $R/smoke \
  2>&1 | f | tail -4
pack
