# The tail's decode attention split wider (~5 minutes on a cold machine). nano256's last ~105 steps are decode-only
# steps of 1-112 sequences over 1,000-2,000-token contexts, above the power cap's clock: there the dedicated decode
# kernel (B >= 33 on 7B, one program per (sequence, KV head), no split) reached 62-88% of its KV bytes' floor and
# the fused one (B <= 32, split) 49-64% (s45a). TACHYON_DECODE_SPLIT_WAVES=W splits the context whenever the
# programs are fewer than W times the SM count, into max(2, W) times the SM count. step_trace.py replays the decode
# graphs of 8-128 sequences at 1,500 +- 500-token contexts under each variant; then the GPU decode kernel tests with
# W = 4, so every split path they reach is exercised at the wider split.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s45b.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s45b
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
timeout 300 python3 benchmarks/gpu/step_trace.py --out $R --shape qwen2.5-7b --context 1500 --context-spread 500 \
  --batches 8,16,24,32,48,64,80,96,112,128 --replays 5 \
  --variants auto,swaves=2,swaves=4,swaves=4+fda=0,fda=0,swaves=8+fda=0 > $R/trace.log 2>&1
f < $R/trace.log | grep "us/step\|Error\|error" | sed 's/ us\/step;.*//' | cut -c1-200
tar czf $OUT/s45b.tgz -C $R .
TACHYON_DECODE_SPLIT_WAVES=4 timeout 200 python3 -m pytest -q -x tests/test_kernels.py tests/test_kernels_decode_fused.py tests/test_kernels_capture.py \
  -k "decode or fused or split" 2>&1 | tail -3
tar czf $OUT/s45b.tgz -C $R .
