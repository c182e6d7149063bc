# Stop 56, second call: the layer kernel's five launches (TACHYON_LAYER_BS1=phases) as the batch-1 default. The
# layer kernel's tests with every failure's message (s56a's cut them off), the GPU kernel tests and the 0.6B bs1
# acceptance row beside transformers (acceptance.sh tests,bs1_06), then one `bench offline` bs1 with the layer
# kernel off on the same board for the ratio. ~7 minutes on a warm machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s56b.sh
. benchmarks/gpu/bench_scripts/env.sh
echo "== layer tests $(date +%T)"
timeout 150 python3 -m pytest -q -rf --tb=short tests/test_kernels_layer_bs1.py > $OUT/pytest_layer_bs1.txt 2>&1
grep "passed\|failed\|FAILED\|Error" $OUT/pytest_layer_bs1.txt | tail -12
bash benchmarks/gpu/bench_scripts/acceptance.sh tests,bs1_06
echo "== off $(date +%T)"
TACHYON_LAYER_BS1=off timeout 100 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 \
  --repeats 5 --output $OUT/bs1_qwen3-0.6b_layer-off.json 2>&1 | f | grep "runs:\|^| tachyon \|rror"
echo "== done $(date +%T)"
