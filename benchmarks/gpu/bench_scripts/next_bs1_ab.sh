# One H200 call, prepared at stop 13 (not run yet). First the race check of stop 13's reads above the PDL wait
# (greedy tokens and log-probs with PDL on equal to off, bit for bit, batch 1 and 4, both shapes: it was not
# run at 1b4054a, the device time having run out). Then the next batch-1 candidates as decode-step replays, each
# against the shipped default in the same process. (1) GEMV configs whose BLOCK_K covers K, so every resident
# program loads its whole weight rows before the PDL wait (warm-up's picks load one tile of 2-37); (2) 16-key
# decode tiles at batch 1 (0.6B gained 0.025 ms at 512 tokens at stop 13; 7B lost at 4,096), here also at 4,096;
# (3) the 7B gate_up / lm_head GEMVs triggering their successor during their last wave (TACHYON_PDL_GEMV_LAST_WAVE=k
# programs per SM; they do not trigger at all by default, because triggering at their start cost 0.34 ms).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/next_bs1_ab.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
mkdir -p $OUT/pdl
timeout 200 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b,qwen2.5-7b --workloads bs1 --pdl-check \
  --out $OUT/pdl 2>&1 | grep -v -i warn | grep "pdl_on_vs_off\|tok/s\|bs1" | tail -6
V7=${V7:-auto,gemv.o_proj=4:4096:8:1,gemv.qkv_proj=2:4096:8:1,lastwave=4,lastwave=8,lastwave=16}
V06=${V06:-auto,dtile=16:2:2,gemv.down_proj=2:4096:8:1,gemv.gate_up_proj=8:1024:8:1,gemv.o_proj=4:2048:8:1}
timeout 240 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 2 --variants $V7 --out $OUT/ab_7b \
  2>&1 | grep -v -i warn | tail -12
timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 2 --variants $V06 --out $OUT/ab_06b \
  2>&1 | grep -v -i warn | tail -10
timeout 100 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 1 --context 4096 --max-model-len 40960 \
  --variants auto,dtile=16:2:2 --out $OUT/ab_06b_4096 2>&1 | grep -v -i warn | tail -2
