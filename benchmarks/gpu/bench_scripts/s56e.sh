# Stop 56, last call: two projection programs a multiprocessor as the five-launch default
# (TACHYON_LAYER_BS1_GEMV_PROGRAMS=2): greedy parity at batch 1, then the acceptance's bs1_06 beside transformers.
# ~3 minutes. Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s56e.sh
. benchmarks/gpu/bench_scripts/env.sh
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --parity --parity-single \
  --tag _gprog2 --out $OUT/smoke 2>&1 | f | grep -i "parity\|identical\|error" | tail -3 | cut -c1-400
bash benchmarks/gpu/bench_scripts/acceptance.sh bs1_06
