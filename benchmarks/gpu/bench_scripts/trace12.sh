# Session 12, call 2: where the FP8 batch-1 / batch-8 step's time goes after the fused quantization (open12: 7B
# bs1 went 387.5 -> 348.0 tok/s). Variants: the head's choices (auto), the unfused quantization (fq=0), and the
# session-11 GEMV configs forced on every layer (old), on Qwen2.5-7B and Qwen3-0.6B.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/trace12.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/trace12
mkdir -p $R/7b $R/06b
pack() { tar czf $OUT/trace12.tgz -C $R .; }
OLD="gemv.qkv_proj=2:2048:4:1+gemv.o_proj=4:1024:4:3+gemv.gate_up_proj=8:512:4:3+gemv.down_proj=4:1024:4:3"
timeout 200 python3 benchmarks/gpu/step_trace.py --shape qwen2.5-7b --quantization fp8 --batches 1,8 \
  --variants "auto,fq=0,$OLD,fq=0+$OLD" --out $R/7b 2>&1 | grep -v -i warn | tail -30
pack
timeout 120 python3 benchmarks/gpu/step_trace.py --shape qwen3-0.6b --quantization fp8 --batches 1,8 \
  --variants "auto,fq=0" --out $R/06b 2>&1 | grep -v -i warn | tail -30
pack
