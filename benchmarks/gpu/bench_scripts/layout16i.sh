# Session 16, after layout16h (pads after the decode graphs' capture or after the prefill runner's staging make
# 0.6B bs1 slow; once the engine is built they do not): without prefill graphs (prefill_graph_max_tokens=0), do
# pads at the same site still do it? One build per process.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16i.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16i
mkdir -p $R
pack() { tar czf $OUT/layout16i.tgz -C $R .; }
one() {  # tag site pad_kib [flags]
  t=$1 site=$2 pad=$3
  shift 3
  timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $site --pads $pad --runs 4 "$@" \
    --out $R/l_${t}_${site}_$pad.json 2>&1 | f | grep -E "pad |Error" | sed "s/^/$t $site /" | tee -a $R/layout.txt
}
one noprefill load 0 --no-prefill-graphs
one noprefill after 256 --no-prefill-graphs
one noprefill after 768 --no-prefill-graphs
one default after 256
pack
