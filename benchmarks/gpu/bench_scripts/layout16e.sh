# Session 16, after layout16d (the slow mode is not the inline merge's counters: with the merge kernel, no counters,
# small pads before the decode graph runner still make 0.6B bs1 slow). The other small buffer such a pad moves is
# the decode graphs' query_start_loc (2.5 KB). With it moved to a 2 MiB block of the large pool (--qsl-large):
# graphs-site pads 0-768 KiB and load-site pads 256 / 1024 / 1536 KiB (all slow in layout16c), one build per process;
# a default graphs-site 256 KiB build as the control.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/layout16e.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
f() { grep -v -i warn | grep -v "Loading weights" | grep -v "^\s*$"; }
R=/tmp/layout16e
mkdir -p $R
pack() { tar czf $OUT/layout16e.tgz -C $R .; }
one() {  # variant site pad_kib [flags]
  v=$1 site=$2 pad=$3
  shift 3
  timeout 60 python3 benchmarks/gpu/layout_probe.py --kib --site $site --pads $pad --runs 4 "$@" \
    --out $R/l_${v}_${site}_$pad.json 2>&1 | f | grep -E "pad |Error" | sed "s/^/$v $site /" | tee -a $R/layout.txt
}
one default graphs 256
for pad in 0 256 512 768; do one qsl graphs $pad --qsl-large; pack; done
for pad in 256 1024 1536; do one qsl load $pad --qsl-large; pack; done
one default graphs 512
pack
