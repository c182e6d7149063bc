# Session 12's last H200 call: greedy parity of the engine with an e4m3 KV cache against the torch reference path
# with the same cache dtype (Qwen2.5-7B, 4 seed8 prompts together, 32 tokens; then Qwen3-0.6B one at a time),
# and Qwen3-0.6B every workload with the FP8 cache.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/kvparity12.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/kvparity12
mkdir -p $R/smoke
pack() { tar czf $OUT/kvparity12.tgz -C $R .; }
timeout 150 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --kv-cache-dtype fp8 --parity --workloads bs1 \
  --tag _kvfp8_parity --out $R/smoke 2>&1 | f | grep "identical" | cut -c1-600
pack
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --kv-cache-dtype fp8 --parity --parity-single \
  --tag _kvfp8 --out $R/smoke 2>&1 | f | grep -v "^{.*workload" | grep "identical\|tok/s\|bs1 \|seed8 \|nano256 " | cut -c1-600
pack
