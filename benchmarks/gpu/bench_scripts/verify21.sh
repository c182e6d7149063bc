# Session 21, last call: the shared StepGraphs capture on the GPU. mixed_check.py on 0.6B (mixed graphs captured and
# replayed against the eager padded step), engine_smoke.py --parity (greedy parity through the prefill and decode
# graphs), arrivals_probe.py (launched mixed steps) and the 0.6B bs1 figure. Packed into $OUT/verify21.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/verify21.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/verify21
mkdir -p $R/offline $R/arrivals $R/smoke
pack() { tar czf $OUT/verify21.tgz -C $R .; }
timeout 90 python3 benchmarks/gpu/mixed_check.py --shapes qwen3-0.6b --steps 144:560,8:200 --out $R 2>&1 | f \
  | tee $R/mixed_check.txt | grep -o "start-up [0-9.]* s\|'key'.*'rel_err_eager'\|'ok': [A-Za-z]*"
echo "mixed_check rc ${PIPESTATUS[0]}"
pack
timeout 60 python3 benchmarks/gpu/arrivals_probe.py --shape qwen3-0.6b --rate 8 --num 64 --tag verify \
  --out $R/arrivals 2>&1 | f | grep "^{\|Error" | cut -c1-700
pack
timeout 90 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --workloads bs1 --parity --out $R/smoke 2>&1 \
  | f | tail -8 | cut -c1-400
pack
