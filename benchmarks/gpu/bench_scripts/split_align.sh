# One H200 call (session 8): the dedicated decode kernel's split granularity apart from its key tile
# (TACHYON_DECODE_SPLIT_ALIGN, step_ab knob dalign): engine-level A/B at batch 1 on both shapes (engine_gaps.py,
# 128 + 256 tokens), then step replays at longer contexts, where the split lengths must not get worse.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/split_align.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "^\s*$"; }
timeout 100 python3 benchmarks/gpu/engine_gaps.py --shape qwen3-0.6b --no-profile \
  --variants dalign=32,auto,dalign=32,auto,dalign=16 --out $OUT/e06 2>&1 | f | cut -c1-80 | tail -6
timeout 120 python3 benchmarks/gpu/engine_gaps.py --shape qwen2.5-7b --no-profile --variants dalign=32,auto,dalign=32 \
  --out $OUT/e7 2>&1 | f | cut -c1-80 | tail -4
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 1 --context 1024 --variants auto,dalign=32 \
  --out $OUT/s06_1024 2>&1 | f | tail -2
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 1 --context 4096 --max-model-len 40960 \
  --variants auto,dalign=32 --out $OUT/s06_4096 2>&1 | f | tail -2
timeout 120 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 --context 4096 --max-model-len 32768 \
  --variants auto,dalign=32 --out $OUT/s7_4096 2>&1 | f | tail -2
