# Session 26: Qwen2.5-7B cold start-up, captures without an eager run first (the default) against
# TACHYON_CAPTURE_EAGER_FIRST=1 (an eager run before every capture, as before this session) and
# TACHYON_PREBUILD_LAUNCHERS=1 (the compile pass also builds the kernels' host launchers on its threads; opt-in, not
# yet measured). The machine's first process (the default), then the three in turn, $PAIRS times (default 2). Each
# process has an empty Triton cache (its own TRITON_CACHE_DIR) and records its phases' parts (`detail`: the compile
# pass's body / wait / launcher seconds, the memory profile, the module loads, capture seconds, graph counts, eager
# runs per family). Results: $OUT/startup26.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/startup26.sh (carry .whl; ~3 min)
# From 1cf4f9f the prebuild is the default, and TACHYON_PREBUILD_LAUNCHERS=1 is the same as no setting.
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/startup26
mkdir -p $R
pack() { tar czf $OUT/startup26.tgz -C $R .; }
one() {  # tag, env assignments (or -)
  env ${2/#-/} TRITON_CACHE_DIR=/tmp/tc26_$1 timeout 120 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b \
    --out $R --tag $1 2>&1 | grep "^{\|Error" | python3 -c "import json,sys
line=sys.stdin.read(); d=json.loads(line) if line.startswith('{') else None
r=lambda x: {k: r(v) for k, v in x.items()} if isinstance(x, dict) else round(x, 2) if isinstance(x, float) else x
print('$1', r({k: d[k] for k in ('load_s', 'warmup_s', 'kv_and_graphs_s', 'total_s')}) if d else line[-400:],
      d and r(d['detail']))" | tee -a $R/runs.txt
  pack
}
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee $R/gpu.txt
one first -
for i in $(seq 1 ${PAIRS:-2}); do
  one eagerfirst_$i TACHYON_CAPTURE_EAGER_FIRST=1
  one default_$i -
  one prebuild_$i TACHYON_PREBUILD_LAUNCHERS=1
done
echo done | tee -a $R/runs.txt
pack
