# The flat fill's new defaults on one board (~8 minutes on a cold machine): the 7B shape's cold start-up (160 mixed
# graphs now: decode buckets from 32, chunk buckets every 32 to 512); 7B nano256, engine alone, alternating
#   old  the previous commit (its tree unpacked under abold/, carried) with TACHYON_FLAT_QUANTUM=128
#        TACHYON_FLAT_ROWS=300: the best of s44b
#   new  this tree's defaults: the same fill, no mixed decode bucket under 32, and a step that lands past a multiple
#        of 128 rows filled to the next
# then 0.6B nano256 beside transformers (acceptance.sh nano_06).
# Make abold/ first: mkdir abold && git archive 49010d1 tachyon | tar -x -C abold (and list it in .git/info/exclude).
# Usage (device, repo root; carry .whl abold): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s44c.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s44c ROOT=$PWD
mkdir -p $R/startup
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
pack() { tar czf $OUT/s44c.tgz -C $R .; }
TRITON_CACHE_DIR=/tmp/tc_s44c timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup \
  2>&1 | grep "^{\|Error" | cut -c1-400
pack
nano7() {  # tag
  timeout 100 python3 $ROOT/benchmarks/gpu/bench_scripts/bench.py bench offline --backend tachyon --model qwen2.5-7b \
    --dummy --workload nano256 --output $R/nano256_$1.json 2>&1 | f | grep "^| tachyon\|Error" | sed "s/^/$1 /"
}
for i in 1 2; do
  (cd abold && export PYTHONPATH=/tmp/site:$ROOT/abold TACHYON_FLAT_QUANTUM=128 TACHYON_FLAT_ROWS=300 && nano7 old$i)
  nano7 new$i
  pack
done
NANO_TIMEOUT=280 bash benchmarks/gpu/bench_scripts/acceptance.sh nano_06
