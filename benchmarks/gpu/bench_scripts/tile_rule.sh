# Split-decode key tile at batch 1, engine level (benchmarks/gpu/engine_gaps.py, alternating rounds): the shipped
# 64-key tile against 32:4:2 on both shapes at a 128-token prompt and at a 3,584-token one (contexts to 3,840), then
# the 0.6B bs1 acceptance workload beside transformers at this tree. Results in $OUT/tile_rule.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/tile_rule.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/tile_rule
mkdir -p $R/offline
V=${V:-auto,dtile=32:4:2,auto,dtile=32:4:2}
for shape in qwen3-0.6b qwen2.5-7b; do
  for plen in 128 3584; do
    mkdir -p $R/${shape}_$plen
    timeout 150 python3 benchmarks/gpu/engine_gaps.py --shape $shape --prompt-len $plen --variants $V --no-profile \
      --out $R/${shape}_$plen 2>&1 | grep -v -i warn | grep "tok/s" | cut -c1-90
  done
done
timeout 120 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 \
  --output $R/offline/bs1_qwen3-0.6b.json --report-dir $R/offline 2>&1 | grep "^| \(hf\|tachyon\) " | head -2
tar czf $OUT/tile_rule.tgz -C $R .
