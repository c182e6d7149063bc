# Session 10's check of the launched prefill and the prefill attention table together: ttft_probe.py (launched
# against synchronous prefill, alternating, both shapes), prefill_trace.py of one 128-token prompt (kernels of the
# prefill graph), `tachyon bench offline --backend tachyon` bs1 on both shapes, every standard workload on the 7B
# shape (engine_smoke.py: nano256's prefill chunks use the table too), greedy parity at batch 1, and the GPU
# attention/kernel tests (bf16 runs every table config). Results packed into $OUT/verify10.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/verify10.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/verify10
mkdir -p $R/offline $R/smoke $R/trace
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 120 python3 benchmarks/gpu/ttft_probe.py --shape qwen3-0.6b --rounds 6 --out $R 2>&1 | f | grep "median\|replay"
timeout 150 python3 benchmarks/gpu/ttft_probe.py --shape qwen2.5-7b --rounds 4 --out $R 2>&1 | f | grep "median\|replay"
for s in qwen3-0.6b qwen2.5-7b; do
  timeout 100 python3 benchmarks/gpu/prefill_trace.py --shape $s --prompts 1 --prompt-len 128 \
    --max-num-batched-tokens 2048 --repeats 5 --out $R/trace 2>&1 | f | head -6
done
for run in "qwen3-0.6b bs1 60" "qwen3-0.6b bs1 60" "qwen2.5-7b bs1 100"; do
  set -- $run
  timeout $3 $B bench offline --backend tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1_$RANDOM.json \
    2>&1 | f | grep "^| tachyon " | head -1
done
timeout 200 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | f | tail -4
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --parity --parity-single \
  --tag _parity --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -3
timeout 150 python3 -m pytest -q tests/test_kernels.py 2>&1 | tail -2 | tee $R/gpu_tests.txt
tar czf $OUT/verify10.tgz -C $R .
