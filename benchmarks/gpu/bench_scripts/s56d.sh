# Stop 56, fourth call: the five-launch layer kernel's per-launch knobs. TACHYON_LAYER_BS1_PHASE_WARPS (warps of
# each of the five launches; the attention launch has one (KV head, split) item a program, which 16 warps may
# over-serve) and TACHYON_LAYER_BS1_GEMV_PROGRAMS (the projection launches on 2 or 4 programs a multiprocessor,
# fewer rows each). The layer kernel's tests first (the knobs' test included), then a 0.6B engine bs1 A/B, decode
# graphs re-captured per variant, two alternating rounds; on an H200 also the acceptance's bs1_06 (beside
# transformers). ~3 minutes on a warm machine (~5.5 on an H200). Usage (device, repo root;
# carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s56d.sh
. benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
timeout 150 python3 -m pytest -q -rf --tb=short tests/test_kernels_layer_bs1.py > $OUT/pytest_layer_bs1.txt 2>&1
grep "passed\|failed\|FAILED\|Error" $OUT/pytest_layer_bs1.txt | tail -8
V=auto,layer=off,pwarps=16:4:16:16:16,pwarps=16:8:16:16:16,gprog=2,gprog=2+pwarps=8:4:8:8:8,gprog=2+pwarps=16:4:16:16:16
V=$V,gprog=4+pwarps=8:4:8:8:8,pwarps=8:4:16:16:16
timeout 300 python3 benchmarks/gpu/engine_gaps.py --shape qwen3-0.6b --out $OUT/gaps --no-profile --variants $V,$V \
  2>&1 | f | grep "tok/s\|Error\|error" | cut -c1-100
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/gpu/bench_scripts/acceptance.sh bs1_06
fi
echo "== done $(date +%T)"
