# (Ran at 7e48ea0, where the engine turned on expandable segments; reverted after expand17d.sh: at head the engine keeps
# torch's default allocator, so this script now measures that. benchmarks/results/session17/README.md has both.)
# Session 17, fourth call: the engine now turns on expandable segments (engine/allocator.py). (1) the GPU kernel
# tests, 8 xdist workers, full log kept (final17's 220 s run printed no summary); (2) the allocator setting torch
# reports (alloc_probe.py since the revert); (3) every standard workload on each shape (engine_smoke, parity on 0.6B), to
# compare with final17 (default allocator); (4) Qwen3-0.6B bs1 in three separate processes (--repeats 5 each):
# under the default allocator a process ran at ~1,510 or ~1,490 tok/s. Packed into $OUT/expand17.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/expand17.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/expand17
mkdir -p $R/smoke $R/offline
pack() { tar czf $OUT/expand17.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels*.py tests/engine/test_kept_rows.py \
  > $R/gpu_tests_full.txt 2>&1
echo "pytest rc $?" | tee $R/gpu_tests.txt
grep -E "FAILED|ERROR|passed|failed" $R/gpu_tests_full.txt | tail -15 | tee -a $R/gpu_tests.txt
pack
python3 benchmarks/gpu/alloc_probe.py 2>&1 | f | tee $R/allocator.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 140 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --out $R/smoke 2>&1 | f | tail -3
pack
timeout 110 python3 benchmarks/gpu/engine_smoke.py --shapes qwen3-0.6b --parity --out $R/smoke 2>&1 | f | tail -4
kill $SMI
pack
for i in 1 2 3; do
  timeout 60 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 5 \
    --output $R/offline/bs1_p$i.json --report-dir $R/offline 2>&1 | f | grep "runs:" | sed "s/^/process $i /"
  pack
done
