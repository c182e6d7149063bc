# One H200 call: batch-1 decode-step replays of this tree (the qkv GEMV finishing qkv_post on / off; decode key
# tiles via TACHYON_DECODE_TILE) alternating with an older commit's tree (unpacked under $OLD), Qwen2.5-7B at a
# 512-token context; the tiles at 4,096 tokens with graphs sized for max_model_len 32768 (the engine default);
# the tiles on Qwen3-0.6B; GPU tests of the qkv GEMV first.
# Usage (device, repo root): OLD=old TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/decode_tile_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 100 python3 -m pytest -q tests/test_kernels_gemv_qkv.py 2>&1 | tail -2 | tee $OUT/gpu_tests.txt
T7=${T7:-auto,qkvpost=0,dtile=64:4:2,dtile=64:2:2,dtile=32:2:2}
for r in 0 1; do
  timeout 170 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 --variants $T7 --out $OUT/new_7b_$r \
    2>&1 | grep -v -i warn | tail -5
  (cd $OLD && PYTHONPATH=/tmp/site:$PWD timeout 60 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 \
    --variants auto --out $OUT/old_7b_$r 2>&1 | grep -v -i warn | tail -1 | sed 's/^/old /')
done
timeout 120 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 2 --context 4096 --max-model-len 32768 \
  --variants auto,dtile=64:4:2,dtile=64:2:2 --out $OUT/new_7b_4096 2>&1 | grep -v -i warn | tail -6
timeout 120 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 2 \
  --variants auto,dtile=64:4:2,dtile=64:2:2,dtile=32:2:2 --out $OUT/new_06b 2>&1 | grep -v -i warn | tail -8
