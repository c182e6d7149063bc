# Session 26's acceptance call, at one commit (captures without an eager run; probes and the cache placed as before):
#   1. Qwen2.5-7B cold start-up, the machine's first process (empty Triton cache)
#   2. Qwen3-0.6B bs1 beside transformers (--repeats 5), each backend in its own process
#   3. Qwen3-0.6B bs1 engine alone: TACHYON_CAPTURE_EAGER_FIRST=1 (every capture after an eager run) / the default
#   4. Qwen2.5-7B bs1 and seed8 beside transformers (--repeats 3)
#   5. nano256 engine alone (--repeats 3), both shapes
#   6. the GPU kernel tests at real sizes (tests/test_kernels*.py, 8 workers)
# Packed into $OUT/final26.tgz after every step.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/final26.sh (carry .whl; ~9 min)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/final26
mkdir -p $R/startup $R/offline $R/ab
pack() { tar czf $OUT/final26.tgz -C $R .; }
rows() { grep "runs:\|^| \(hf\|tachyon\) \|Error\|error\|FAILED"; }
step() { echo "== $1 $(date +%T)" | tee -a $R/phases.txt; }
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee $R/gpu.txt
step startup
TRITON_CACHE_DIR=/tmp/tc_final26 timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R/startup \
  2>&1 | grep "^{\|Error" | cut -c1-300
pack
step bs1_0.6b
timeout 200 $B bench offline --backend hf,tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 5 \
  --output $R/offline/bs1_qwen3-0.6b.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/0.6b bs1 /"
pack
step ab_0.6b
for v in eagerfirst:TACHYON_CAPTURE_EAGER_FIRST=1 default:-; do
  e=${v#*:}; e=${e/#-/}
  env $e timeout 100 $B bench offline --backend tachyon --model qwen3-0.6b --dummy --workload bs1 --repeats 3 \
    --output $R/ab/bs1_${v%%:*}.json 2>&1 | f | grep "runs:\|Error" | sed "s/^/ab ${v%%:*} /" | tee -a $R/ab/runs.txt
done
pack
step hf_7b
for w in "bs1 3" "seed8 3"; do
  set -- $w
  timeout 200 $B bench offline --backend hf,tachyon --model qwen2.5-7b --dummy --workload $1 --repeats $2 \
    --output $R/offline/$1_qwen2.5-7b.json --report-dir $R/offline 2>&1 | f | rows | sed "s/^/7b $1 /"
  pack
done
step nano
for s in qwen3-0.6b qwen2.5-7b; do
  timeout 120 $B bench offline --backend tachyon --model $s --dummy --workload nano256 --repeats 3 \
    --output $R/offline/nano256_$s.json 2>&1 | f | rows | sed "s/^/$s nano256 /"
  pack
done
step gpu_tests
timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3 | tee $R/gpu_tests.txt
step done
pack
