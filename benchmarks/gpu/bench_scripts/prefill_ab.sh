# One H200 call, first on a fresh machine: cold 7B start-up (now with prefill graphs), then the 7B
# workloads with prefill graphs on (default, 512 tokens) and off, for the TTFT A/B.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/prefill_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 90 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $OUT 2>&1 | grep -v -i warn | tail -2
mkdir -p $OUT/smoke
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $OUT/smoke 2>&1 | grep -v -i warn | tail -5
timeout 80 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --prefill-graph-max-tokens 0 \
  --tag _noprefillgraph --out $OUT/smoke 2>&1 | grep -v -i warn | tail -4
