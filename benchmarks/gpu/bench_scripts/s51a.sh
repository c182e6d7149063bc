# Stop 51's work, first GPU call (stop 51 itself had no device time): (1) the penalties kernel's time against its
# floor (run_all.py --only penalties, B 1 / 64 / 256 at V 152,064); (2) constrained_decode.py's plain / bias /
# penalty / json rows at batch 1, 16 and 64 with penalties counted on the device (penalty_counts.py), first with
# only structured rows launched (the default), then with biased and penalised rows launched too
# (--launched-redraws structured,all: decides sampler.LAUNCHED_REDRAWS' default), and top-5 logprob rows (now
# launched: logprobs computed on the device); ABAB: both modes twice;
# (3) the GPU kernel tests (the new test_kernels_penalties.py and the redraw's sync-debug test among them).
# ~6 minutes on a cold machine. Usage (device, repo root; carry .whl and .gpu_tok):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s51a.sh
. benchmarks/gpu/bench_scripts/env.sh
mkdir -p $OUT/kernels
(cd benchmarks/kernels && timeout 120 python3 run_all.py --only penalties --out $OUT/kernels 2>&1 | f | tail -8)
for round in 1 2; do
  mkdir -p $OUT/constrained_$round
  timeout 200 python3 benchmarks/gpu/constrained_decode.py --tokenizer .gpu_tok --out $OUT/constrained_$round \
    --kinds plain,bias,penalty,json,logprobs --launched-redraws structured,all 2>&1 | f > $OUT/constrained_$round/log.txt
  echo "== round $round rc ${PIPESTATUS[0]}"; grep "_b\|sampler costs" $OUT/constrained_$round/log.txt
done
timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -5 | tee $OUT/gpu_tests.txt
