# Session 26: graph captures without an eager run first (engine/cuda_graph.capture_step, kernels/module_loads.py).
# 1. GPU tests of the capture path (tests/test_kernels_capture.py) and mixed_check.py on both shapes (graph replays
#    equal the padded eager step). 2. Qwen2.5-7B cold start-up: this fresh machine's first process (the default), then
#    TACHYON_CAPTURE_EAGER_FIRST=1 (every capture after an eager run, as before) and the default alternating, twice,
#    and one with TACHYON_MIXED_COMPILE_KEYS=all. Each process has an empty Triton cache (its own TRITON_CACHE_DIR) and
#    records its phases' parts (`detail`: warm-up parts, capture seconds, graph counts, eager runs per family).
# Usage (device, repo root, first call on a fresh machine): TACHYON_GIT_SHA=<sha> bash
#   benchmarks/gpu/bench_scripts/capture26.sh (carry .whl; ~6 min)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/capture26
mkdir -p $R
pack() { tar czf $OUT/capture26.tgz -C $R .; }
one() {  # tag, env assignments (or -)
  env ${2/#-/} TRITON_CACHE_DIR=/tmp/tc26_$1 timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b \
    --out $R --tag $1 2>&1 | grep "^{\|Error" | python3 -c "import json,sys
line=sys.stdin.read(); d=json.loads(line) if line.startswith('{') else None
print('$1', {k: round(d[k], 2) for k in ('load_s', 'warmup_s', 'kv_and_graphs_s', 'total_s')} if d else line[-400:],
      d and {k: (round(v, 2) if isinstance(v, float) else v) for k, v in d['detail'].items()})" | tee -a $R/runs.txt
  pack
}
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee $R/gpu.txt
one first -
python3 -c "import inspect, triton.compiler.compiler as c; print(inspect.getsource(c.CompiledKernel._init_handles)[:300])"
timeout 120 python3 -m pytest -q tests/test_kernels_capture.py 2>&1 | tail -3 | tee $R/tests.txt
timeout 200 python3 benchmarks/gpu/mixed_check.py --out $R 2>&1 | f | tail -12 | tee $R/mixed_check.txt
pack
for i in 1 2; do
  one eagerfirst_$i TACHYON_CAPTURE_EAGER_FIRST=1
  one default_$i -
done
one compileall TACHYON_MIXED_COMPILE_KEYS=all
echo done | tee -a $R/runs.txt
pack
