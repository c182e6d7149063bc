# Next probe after layout16i (written at stop 22, not yet run): if the slow mode follows the process's device
# mappings (a new segment changing the GPU TLB's reach), torch's expandable segments, which grow one mapping per pool
# instead of adding segments, should make the pads harmless. One build per process, 0.6B bs1, default allocator
# against PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, pads 0 / 256 / 768 KiB before the load and right after
# the decode graphs' capture.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16j.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16j
mkdir -p $R
pack() { tar czf $OUT/layout16j.tgz -C $R .; }
one() {  # tag site pad_kib [env...]
  t=$1 site=$2 pad=$3
  shift 3
  env "$@" timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $site --pads $pad --runs 4 \
    --out $R/l_${t}_${site}_$pad.json 2>&1 | f | grep -E "pad |Error" | sed "s/^/$t $site /" | tee -a $R/layout.txt
}
for x in "load 0" "load 256" "after 256" "after 768"; do
  one default $x
  one expandable $x PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  pack
done
