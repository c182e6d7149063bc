# Session 13, third call: (1) the kept-rows check on both shapes; (2) cublas_forms.py (F.linear against the
# transposed problem and the cuBLASLt backend at 64-256 rows; fp32 logits written by cuBLAS itself);
# (3) Qwen2.5-7B nano256 at max_num_batched_tokens 8,192 (default) / 16,384 / 4,096, alternating, nvidia-smi beside.
# Packed into $OUT/cub13.tgz as they come.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/cub13.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/cub13
mkdir -p $R/smoke $R/forms
pack() { tar czf $OUT/cub13.tgz -C $R .; }
timeout 150 python3 benchmarks/gpu/kept_rows_check.py 2>&1 | grep -v -i warn | tee $R/kept_rows_check.txt
pack
timeout 150 python3 benchmarks/kernels/cublas_forms.py --out $R/forms 2>&1 | grep -v -i warn | tee $R/forms.txt
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
for t in 8192 16384 4096 8192; do
  echo "$(date +%T.%N) mbt$t" >> $R/order.txt
  timeout 100 python3 benchmarks/gpu/engine_smoke.py --shapes qwen2.5-7b --workloads nano256 --max-num-batched-tokens $t \
    --tag _mbt$t --out $R/smoke 2>&1 | f | grep -v "^{" | tail -1 | sed "s/^/mbt$t /" | tee -a $R/order.txt
  pack
done
kill $SMI
pack
