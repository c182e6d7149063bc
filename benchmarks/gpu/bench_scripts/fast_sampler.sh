# One H200 call: the sampler's rejection fast path (top-p rows without top-k). GPU sampling tests; sampler timing
# per FAST_RACES on synthetic logits; 7B decode-step replays with it off / on; the 7B engine's bs1 and seed8.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/fast_sampler.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
[ -n "$SKIP_TESTS" ] || timeout 150 python3 -m pytest -q tests/test_kernels_sampling.py 2>&1 | tail -3
timeout 100 python3 benchmarks/kernels/sample_timing.py --batches 8,256 --out $OUT/sample \
  --variants "${SAMPLER_VARIANTS:-FAST_RACES=0;FAST_RACES=4;FAST_RACES=2;FAST_RACES=8}" 2>&1 | grep -v -i warn | grep -v " ok=True" | tail -5
python3 -c "
import json; d = json.load(open('$OUT/sample/sample_timing.json'))
for r in d['rows']: print(r['FAST_RACES'], r['B'], r['logits'], r['mode'], round(r['graph_us'], 1), r['ok'])"
timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --variants races=0,auto,races=2 \
  --out $OUT/step_ab_7b 2>&1 | grep -v -i warn | tail -6
mkdir -p $OUT/smoke
timeout 120 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads bs1,seed8 --tag _fast_sampler \
  --out $OUT/smoke 2>&1 | grep -v -i warn | tail -4
