# One H200 call: decode key tiles of split launches: the dedicated kernel's (batch 1, TACHYON_DECODE_TILE) on both
# shapes at a 512-token context and on Qwen2.5-7B at 4,096 with graphs sized for max_model_len 32768 (the engine
# default); the fused kernel's (B = 8, TACHYON_DECODE_FUSED_TILE) at 512.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/decode_tile_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
T=${T:-auto,dtile=128:4:2,dtile=32:2:2,dtile=16:2:2,ftile=64:4:2,ftile=32:4:2}
timeout 190 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 2 --variants $T --out $OUT/ab_7b_512 \
  2>&1 | grep -v -i warn | tail -12
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 --context 4096 --max-model-len 32768 \
  --variants auto,dtile=128:4:2,dtile=32:2:2,dtile=16:2:2 --out $OUT/ab_7b_4096 2>&1 | grep -v -i warn | tail -4
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 2 --variants $T --out $OUT/ab_06b_512 \
  2>&1 | grep -v -i warn | tail -12
