# Stop 59 (not run yet: no device time left): why stop 58's cvt:asm widening lost in the mixed launch. Three
# flat-shaped 7B steps over an e4m3 cache (mixed_attn_tiles.py --kv-fp8): the decode part alone and the one launch,
# longest first, under cvt and cvt:asm (and the default forms); graph-replayed µs a layer. ~1-2 min, any card.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s59d.sh
source benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
timeout 400 python3 benchmarks/gpu/mixed_attn_tiles.py --out $OUT/mixed_fp8 --tiles "" --kv-fp8 \
  --widens cvt,cvt:asm,asm:cvt 2>&1 | f | tail -40 | tee $OUT/mixed_fp8.txt
