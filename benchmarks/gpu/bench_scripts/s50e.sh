# Stop 50, seventh call: decode steps holding biased, penalised or structured rows launched like plain ones
# (ModelRunner.finish_launch redraws those rows on the device once the previous step's tokens are processed), on
# constrained_decode.py's kinds at batch 1, 16 and 64. ~3 minutes on a cold machine.
# Usage (device, repo root; carry .whl and .gpu_tok): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s50e.sh
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/launched
timeout 200 python3 benchmarks/gpu/constrained_decode.py --tokenizer .gpu_tok --out $OUT/launched \
  --kinds plain,bias,penalty,json,regex,choice 2>&1 | grep -v -i warn | tee $OUT/launched/log.txt | tail -30
