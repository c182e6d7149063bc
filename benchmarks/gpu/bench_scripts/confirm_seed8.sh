# One H200 call: Qwen2.5-7B seed8 beside transformers in the same run (tachyon bench offline) and the engine's
# seed8 / nano256 (engine_smoke), after a change to the B >= 2 decode path.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/confirm_seed8.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/confirm
mkdir -p $R/offline $R/smoke
timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads seed8,nano256 --out $R/smoke \
  2>&1 | grep -v -i warn | tail -3
timeout 150 $B bench offline --backend hf,tachyon --model qwen2.5-7b --dummy --workload seed8 \
  --output $R/offline/seed8_qwen2.5-7b.json --report-dir $R/offline 2>&1 | grep -v "Loading weights" | tail -4
tar czf $OUT/confirm.tgz -C $R .
