# Session 10's first H200 call: the prefill launched without waiting (overlap) against the synchronous prefill,
# alternating rounds of bs1 per shape (ttft_probe.py: TTFT, TPOT, the prefill's GPU time and the GPU's idle gap
# before the first decode step); then `tachyon bench offline --backend tachyon` on bs1 (both shapes) and seed8
# (7B), and greedy parity at batch 1 against the torch reference path. Results packed into $OUT/ttft.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/ttft.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/ttft
mkdir -p $R/offline $R/smoke
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 120 python3 benchmarks/gpu/ttft_probe.py --shape qwen3-0.6b --rounds 6 --out $R 2>&1 | f | grep "median\|replay"
timeout 150 python3 benchmarks/gpu/ttft_probe.py --shape qwen2.5-7b --rounds 4 --out $R 2>&1 | f | grep "median\|replay"
for run in "qwen3-0.6b bs1 60" "qwen3-0.6b bs1 60" "qwen2.5-7b bs1 100" "qwen2.5-7b seed8 100"; do
  set -- $run
  timeout $3 $B bench offline --backend tachyon --model $1 --dummy --workload $2 --output $R/offline/$2_$1_$RANDOM.json \
    2>&1 | f | grep "^| tachyon " | head -1
done
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --parity --parity-single \
  --tag _parity --out $R/smoke 2>&1 | f | grep -i "parity\|identical" | tail -3
tar czf $OUT/ttft.tgz -C $R .
