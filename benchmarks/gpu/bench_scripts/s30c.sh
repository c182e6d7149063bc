# Session 30 (stop 37), last call: requests arriving while others decode (arrivals_probe.py, Qwen2.5-7B, 64 nano256
# requests at 8/s, the server's 2,048-token budget) with the mixed steps' attention in one launch and in two
# (TACHYON_MIXED_ATTN), alternating, each in its own process. Packed into $OUT/s30c.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s30c.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s30c
mkdir -p $R
pack() { tar czf $OUT/s30c.tgz -C $R .; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
i=0
for a in ${ORDER:-one two one two}; do
  i=$((i + 1))
  TACHYON_MIXED_ATTN=$a timeout ${EACH:-55} python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --rate 8 \
    --num 64 --tag ${i}_$a --out $R > $R/${i}_$a.log 2>&1
  echo "$i $a rc $?"; grep -i "ttft\|tok/s\|error" $R/${i}_$a.log | tail -3
  pack
done
