# One H200 call: this tree's decode-step replays (the qkv GEMV finishing qkv_post on and off, decode key tiles
# via TACHYON_DECODE_TILE) alternating with an older commit's tree (unpacked under $OLD, as ab_vs_commit.sh),
# Qwen2.5-7B; the key tiles on Qwen3-0.6B; then greedy parity of the 7B-shaped engine at batch 1 (prompts one
# at a time) against the torch reference path, and its bs1 throughput.
# Usage (device, repo root): OLD=old TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/qkv_post_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
for r in 0 1; do
  timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 \
    --variants "auto,qkvpost=0,dtile=64:4:2,dtile=128:8:2" --out $OUT/new_7b_$r 2>&1 | grep -v -i warn | tail -4
  (cd $OLD && PYTHONPATH=/tmp/site:$PWD timeout 60 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 \
    --variants auto --out $OUT/old_7b_$r 2>&1 | grep -v -i warn | tail -1 | sed 's/^/old /')
done
timeout 120 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 2 \
  --variants "auto,dtile=64:4:2,dtile=128:8:2" --out $OUT/new_06b 2>&1 | grep -v -i warn | tail -6
mkdir -p $OUT/smoke
timeout 200 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1 --parity --parity-single \
  --out $OUT/smoke 2>&1 | grep -v -i warn | grep -v "^{\"workload" | tail -4
