# Stop 50, fifth and sixth calls (the fifth's prefetch runs stopped at sampler_costs, fixed by MaskPrefetch.wait): structured rows' next masks prefetched on a background thread (engine/structured.py
# MaskPrefetch) against masks filled when the step samples (--no-prefetch), same machine, twice each (ABAB), on
# constrained_decode.py's structured kinds at batch 1, 16 and 64. ~4 minutes on a cold machine.
# Usage (device, repo root; carry .whl and .gpu_tok): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s50d.sh
. benchmarks/gpu/bench_scripts/env.sh
C="timeout 150 python3 benchmarks/gpu/constrained_decode.py --tokenizer .gpu_tok --kinds plain,json,regex,choice"
for round in 1 2; do
  for v in prefetch no_prefetch; do
    F=""; [ $v = no_prefetch ] && F=--no-prefetch
    mkdir -p $OUT/${v}_$round
    $C $F --out $OUT/${v}_$round 2>&1 | grep -v -i warn > $OUT/${v}_$round/log.txt
    echo "== $v round $round"; grep "_b" $OUT/${v}_$round/log.txt | grep -v "^sampler"
  done
done
