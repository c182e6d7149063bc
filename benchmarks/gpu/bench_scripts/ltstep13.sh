# Session 13, fifth call: the cuBLASLt picks in replayed Qwen2.5-7B decode steps (step_ab.py, 1,024-token
# context, B = 64 / 96 / 128 / 160 / 224 / 256): picked against cuBLAS everywhere (blas=cublas), three rounds
# alternating; then the GEMV / tuning GPU tests again (the CPU-only picker test now skips on a GPU).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/ltstep13.sh
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/ltstep13
mkdir -p $R
pack() { tar czf $OUT/ltstep13.tgz -C $R .; }
timeout 400 python3 benchmarks/gpu/step_ab.py --out $R --shapes qwen2.5-7b --context 1024 --rounds 3 \
  --variants auto,blas=cublas --large 64,96,128,160,224,256 2>&1 | grep -v -i warn | tee $R/step_ab.txt
pack
timeout 120 python3 -m pytest -q tests/test_kernels_gemv.py tests/test_kernels_tuning.py 2>&1 \
  | grep -E "FAILED|passed|failed|Error" | tee $R/gpu_tests.txt
pack
