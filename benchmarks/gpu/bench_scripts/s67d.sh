# Stop 67 (not run: no device time left). Has the engine's 7B nano256 lost ~0.5-1% per MHz since stop 49? Runs at
# the 700 W cap made 9.48-9.63 tok/s per MHz at stops 45-49 and 9.39-9.46 at stops 60 and 67 (median SM clock over
# the timed run; boards differ). This A/B runs stop 49's engine (2a4b9c1, its tachyon/ carried in .old/) and this
# tree's in turn on one board: old, new, old, new; Tachyon only, Qwen2.5-7B nano256, nvidia-smi at 100 ms beside
# each (ROUNDS pairs, default 2). Any card (an H100 is power-capped at 700 W too). ~4 min. Results: ab49.tgz, ab49.txt.
# Set-up here: echo /.old/ >> .git/info/exclude; mkdir -p .old; git archive 2a4b9c1 tachyon | tar -x -C .old
# Usage (device, repo root; carry .whl and .old): TACHYON_GIT_SHA=<sha here> bash benchmarks/gpu/bench_scripts/s67d.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $OUT/gpu.txt
source benchmarks/gpu/bench_scripts/env.sh
R=/tmp/res/ab49
mkdir -p $R
for round in $(seq ${ROUNDS:-2}); do
  for tree in old new; do
    root=$PWD; [ $tree = old ] && root=$PWD/.old
    tag=${tree}_$round
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active,temperature.gpu \
      --format=csv -lms 100 > $R/smi_$tag.csv 2>&1 &
    SMI=$!
    (cd /tmp && PYTHONPATH=/tmp/site:$root TACHYON_GIT_SHA=$([ $tree = old ] && echo 2a4b9c1 || echo $TACHYON_GIT_SHA) \
      timeout 200 python3 $OLDPWD/benchmarks/gpu/bench_scripts/bench.py bench offline --backend tachyon \
      --model qwen2.5-7b --dummy --workload nano256 --warmup-max-tokens 32 --output $R/nano_$tag.json 2>&1 \
      | grep "^| tachyon\|Error\|error" | sed "s/^/$tag /")
    kill $SMI
  done
done
for tag in $(cd $R && ls nano_*.json | grep -v requests | sed "s/nano_//; s/.json//" | sort -t_ -k2,2 -k1,1r); do
  echo "$tag $(python3 benchmarks/gpu/smi_window.py $R/smi_$tag.csv --bench $R/nano_$tag.json 2>&1 | tail -1)"
done | tee $OUT/ab49.txt
tar czf $OUT/ab49.tgz -C /tmp/res ab49
