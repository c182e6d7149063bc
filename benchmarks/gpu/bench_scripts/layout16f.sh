# Session 16, after layout16e: with the per-step small buffers pinned at fixed offsets of one 2 MiB block
# (layout_probe.py --arena: query_start_loc, the split-KV counters, the norm weights), do pads still flip 0.6B bs1
# into the slow mode? One build per process: graphs-site pads 0-768 KiB, a tokens-site 512 KiB, load-site 256 and
# 1,536 KiB; default builds (no arena) at 0 and graphs-site 256 KiB as controls.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16f.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16f
mkdir -p $R
pack() { tar czf $OUT/layout16f.tgz -C $R .; }
one() {  # variant site pad_kib [flags]
  v=$1 site=$2 pad=$3
  shift 3
  timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $site --pads $pad --runs 4 "$@" \
    --out $R/l_${v}_${site}_$pad.json 2>&1 | f | grep -E "pad |Error" | sed "s/^/$v $site /" | tee -a $R/layout.txt
}
one default load 0
one default graphs 256
for x in "graphs 0" "graphs 256" "graphs 512" "graphs 768" "tokens 512" "load 256" "load 1536"; do
  one arena $x --arena
  pack
done
