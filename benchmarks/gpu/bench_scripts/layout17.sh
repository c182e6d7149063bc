# Session 17: is Qwen3-0.6B bs1's slow mode a matter of the process's device mappings? One build per process (4 runs
# each), pads of 256 KiB before the load and right after the decode graphs' capture (both slow at stop 22), against
# no pad: (a) the default allocator; (b) PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (one growing mapping per
# pool instead of new segments); (c) pads from the driver's cuMemAlloc (--raw: a mapping outside torch's allocator)
# before the load, and once the engine is built (--site ready, 256 KiB and 2 MiB: a new mapping after start-up).
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout17.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/layout17
mkdir -p $R
pack() { tar czf $OUT/layout17.tgz -C $R .; }
one() {  # tag site pad_kib [probe flags] [-- env...]
  t=$1 site=$2 pad=$3
  shift 3
  flags=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
  [ "$1" = "--" ] && shift
  env "$@" timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $site --pads $pad --runs 4 "${flags[@]}" \
    --out $R/l_${t}_${site}_$pad.json 2>&1 | f | grep -E "pad |Error" | sed "s/^/$t $site /" | tee -a $R/layout.txt
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for x in "load 0" "load 256" "after 256"; do
  one default $x
  one expandable $x -- PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  pack
done
for x in "load 256" "ready 256" "ready 2048"; do
  one raw $x --raw
  pack
done
one default load 0
pack
