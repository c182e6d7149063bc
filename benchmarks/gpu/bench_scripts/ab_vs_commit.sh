# One H200 call: decode-step replays of this tree against an older commit's (its tachyon/ and
# benchmarks/gpu/ unpacked under $OLD, e.g. `mkdir old && git archive <sha> tachyon benchmarks/gpu | tar -x -C old`,
# untracked, so it travels), alternating, both shapes; GPU tests in TESTS first; then this tree's engine
# workloads for both shapes. Results straight under $OUT.
# Usage (device, repo root): OLD=old TESTS="tests/..." bash benchmarks/gpu/bench_scripts/ab_vs_commit.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
mkdir -p $OUT/smoke
[ -z "$TESTS" ] || timeout 150 python3 -m pytest -q $TESTS 2>&1 | tail -3 | tee $OUT/gpu_tests.txt
for shape in qwen2.5-7b qwen3-0.6b; do
  for r in 0 1; do
    timeout 60 python3 benchmarks/gpu/step_ab.py --shapes $shape --rounds 1 --variants auto --out $OUT/new_${shape}_$r \
      2>&1 | grep -v -i warn | tail -1 | sed 's/^/new /'
    (cd $OLD && PYTHONPATH=/tmp/site:$PWD timeout 60 python3 benchmarks/gpu/step_ab.py --shapes $shape --rounds 1 \
      --variants auto --out $OUT/old_${shape}_$r 2>&1 | grep -v -i warn | tail -1 | sed 's/^/old /')
  done
done
timeout 110 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $OUT/smoke 2>&1 | grep -v -i warn | tail -5
timeout 90 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --out $OUT/smoke 2>&1 | grep -v -i warn | tail -5
