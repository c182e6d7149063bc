# Session 31 (stop 38), first call: is the one-launch mixed attention (TACHYON_MIXED_ATTN=one) ready to be the default?
# 1. Qwen2.5-7B cold engine start-up with one launch and with two, each the first process on its own empty Triton
#    cache (benchmarks/gpu/startup.py). 2. requests arriving while others decode (arrivals_probe.py, 64 nano256
#    requests at 8/s), one launch then two, each on its form's (now warm) cache. 3. Qwen3-0.6B nano256 under the flat,
#    fcfs and lpt policies with one launch (stop 36 measured flat 5-6% behind on 0.6B with two launches).
# Packed into $OUT/s31a.tgz. Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s31a.sh
# (carry .whl). STARTUP / ORDER / RUNS override the lists (RUNS="policy:one|two ..."), EACH the arrivals' limit (s).
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s31a
mkdir -p $R/offline
pack() { tar czf $OUT/s31a.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
STARTUP=${STARTUP:-"one two"}
for a in $STARTUP; do
  TRITON_CACHE_DIR=/tmp/tc_$a TACHYON_MIXED_ATTN=$a timeout 150 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b \
    --out $R --tag cold_$a > $R/startup_$a.log 2>&1
  echo "startup $a rc $?"
  python3 - "$R/startup_qwen2.5-7b_cold_$a.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in d.items() if k not in ("env", "detail", "engine_args")})
PY
  pack
done
ORDER=${ORDER:-"one two"}
i=0
for a in $ORDER; do
  i=$((i + 1))
  TRITON_CACHE_DIR=/tmp/tc_$a TACHYON_MIXED_ATTN=$a timeout ${EACH:-100} python3 benchmarks/gpu/arrivals_probe.py \
    --shape qwen2.5-7b --rate 8 --num 64 --tag ${i}_$a --out $R > $R/arrivals_${i}_$a.log 2>&1
  echo "arrivals $i $a rc $?"; grep -i "ttft\|tok/s\|error" $R/arrivals_${i}_$a.log | tail -3
  pack
done
i=0
RUNS=${RUNS:-"flat:one fcfs:one lpt:one"}
for run in $RUNS; do
  IFS=: read -r p a <<< "$run"
  i=$((i + 1))
  TRITON_CACHE_DIR=/tmp/tc_$a TACHYON_MIXED_ATTN=$a timeout 110 $B bench offline --backend tachyon --model qwen3-0.6b \
    --dummy --workload nano256 --repeats 2 --engine-arg scheduling_policy=$p \
    --output $R/offline/06b_${i}_${p}_${a}.json 2>&1 | f | grep "runs:\|Error\|error" | sed "s/^/$i $p $a /"
  pack
done
