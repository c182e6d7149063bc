# Stop 58: the e4m3 cache's decode widening, on any card. The kv-fp8 kernel tests (the asm mode runs only on CUDA)
# and the layer of knobs it adds, then attn_kv_fp8.py --widen-sweep: bf16 and e4m3 rows, then the e4m3 decode rows per
# TACHYON_KV8_WIDEN mode (cvt, bits, asm) and unsplit key tile. ~3 minutes. Usage (device, repo root; carry .whl):
# TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s58a.sh
source benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/kvw
python3 -m pytest -q -p no:cacheprovider tests/test_kernels_kv_fp8.py \
  "tests/test_kernels.py::test_attention_decode_unsplit_tile_knob" 2>&1 | tail -15 | tee $OUT/kvw/tests.txt
(cd benchmarks/kernels && timeout 420 python3 attn_kv_fp8.py --out $OUT/kvw --widen-sweep) 2>&1 | tail -70 \
  | tee $OUT/kvw/sweep.txt
