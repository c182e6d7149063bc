# For the next stop (~2.5 minutes on a warm machine): where a flat-shaped 7B step's joules go at the power cap
# (step_energy.py: the mixed graph, its GEMMs, lm_head and attention each held alone, and the step re-captured
# without each), beside the GEMM chain's cost per row at the steps' row counts (gemm_rows.py). At the cap only fewer
# joules move nano256 (stop 43).
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s38a.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s38a
mkdir -p $R
timeout 240 python3 benchmarks/gpu/step_energy.py --out $R --steps 146:70+72,200:40+48 2>&1 | f | grep -v '^{' | tail -4
timeout 120 python3 benchmarks/gpu/gemm_rows.py --rows 256,288,320 --out $R/gemm_rows.json 2>&1 | f | tail -4
tar czf $OUT/s38a.tgz -C $R .
