# Stop 50, fourth call: the sampler's raw-draw-first path for structured rows. (1) constrained_decode.py as s50b (the
# dummy model's raw draws are nearly all rejected: the misses rule's cost); (2) Qwen2.5-7B with a 49,152-token
# vocabulary (the tokenizer's: random draws then mostly fit a JSON string) on plain / json_string / json / regex rows,
# raw draw first, then (3) the same with masks first (--mask-first). ~4 minutes on a cold machine.
# Ran at 1566660; the raw-draw path and --mask-first were reverted after it (session42/README.md), so (3) needs
# that commit.
# Usage (device, repo root; carry .whl and .gpu_tok): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s50c.sh
. benchmarks/gpu/bench_scripts/env.sh
C="timeout 200 python3 benchmarks/gpu/constrained_decode.py --tokenizer .gpu_tok"
K=plain,json_string,json,regex
V='{"vocab_size": 49152}'
mkdir -p $OUT/full $OUT/v49k $OUT/v49k_mask_first
$C --out $OUT/full 2>&1 | grep -v -i warn | tee $OUT/full/log.txt | grep "_b\|rc"
$C --out $OUT/v49k --kinds $K --overrides "$V" 2>&1 | grep -v -i warn | tee $OUT/v49k/log.txt | grep "_b\|rc"
$C --out $OUT/v49k_mask_first --kinds $K --overrides "$V" --mask-first 2>&1 | grep -v -i warn \
  | tee $OUT/v49k_mask_first/log.txt | grep "_b\|rc"
