# Session 28's second GPU call: the prefill kernel with unmasked interior tiles and exp2 (and its new bf16 tile
# table) checked and timed against the tree before it. Steps, in the order given (comma-separated):
#   tests     the GPU kernel tests at real sizes (tests/test_kernels*.py, 8 workers)
#   variants  benchmarks/gpu/prefill_attn_variants.py (the engine kernel is now the paged form of v2)
#   long      benchmarks/gpu/long_prefill.py, Qwen2.5-7B, this tree then $OLD's (TTFT of 4k / 16k / 32k prompts)
#   nano      Qwen2.5-7B nano256, engine alone, new / old / new / old processes; then Qwen3-0.6B new / old
# $OLD: an older tree's tachyon/ and benchmarks/ (git archive <sha> tachyon benchmarks | tar -x -C old), untracked.
# Packed into $OUT/s28b.tgz after every step.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> OLD=old bash benchmarks/gpu/bench_scripts/s28b.sh STEPS (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s28b
mkdir -p $R/variants $R/long $R/offline
pack() { tar czf $OUT/s28b.tgz -C $R .; }
rows() { grep "runs:\|^| tachyon \|Error\|error\|FAILED"; }
nano() {  # tree label model
  (cd $1 && PYTHONPATH=/tmp/site:$PWD timeout 120 python3 benchmarks/gpu/bench_scripts/bench.py bench offline \
    --backend tachyon --model $3 --dummy --workload nano256 --warmup-max-tokens 32 \
    --output $R/offline/nano256_${3}_$2.json --report-dir $R/offline/$2 2>&1 | f | rows | sed "s/^/$3 nano256 $2 /")
}
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee -a $R/gpu.txt
for s in ${1//,/ }; do
  echo "== $s $(date +%T)" | tee -a $R/phases.txt
  case $s in
    tests)
      timeout 150 python3 -m pytest -q -n 8 tests/test_kernels*.py 2>&1 | tail -3 | tee $R/gpu_tests.txt ;;
    variants)
      timeout 240 python3 benchmarks/gpu/prefill_attn_variants.py --out $R/variants 2>&1 \
        | grep -v -i warn | tee $R/variants/log.txt | cut -c1-400 ;;
    long)
      timeout 100 python3 benchmarks/gpu/long_prefill.py --label new --out $R/long 2>&1 | grep "L=\|Error"
      # the old tree runs its own copy (the script puts its own tree first on sys.path)
      cp benchmarks/gpu/long_prefill.py $OLD/benchmarks/gpu/
      (cd $OLD && PYTHONPATH=/tmp/site:$PWD timeout 100 python3 benchmarks/gpu/long_prefill.py --label old \
        --out $R/long 2>&1 | grep "L=\|Error") ;;
    nano)
      for r in 0 1; do nano . new_$r qwen2.5-7b; pack; nano $OLD old_$r qwen2.5-7b; pack; done
      nano . new qwen3-0.6b; nano $OLD old qwen3-0.6b ;;
  esac
  pack
done
echo "== done $(date +%T)" | tee -a $R/phases.txt
pack
