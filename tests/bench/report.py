#!/usr/bin/python3
"""report.py - the table and plot generator of scripts/bench.sh.

    report.py record fio|md|none FILE KEY=VALUE...
                                      one record line (metrics + KEY=VALUEs)
    report.py fio FIO_JSON            one fio --output-format=json result ->
                                      one line of JSON metrics on stdout
    report.py netdelta BEFORE AFTER   transport counters moved by one run, as
                                      KEY=VALUE words for `record`: BEFORE and
                                      AFTER are rpfs.stats JSON of a mount
                                      (BEFORE "-": zeros), or AFTER is the fio
                                      engine's rpfs_stats file (one line per
                                      job process, summed; adds engine_cpu_s)
    report.py netcols IO_BYTES KEY=VALUE...
                                      the three counter columns (copies per
                                      byte, registrations and cache misses
                                      per operation) of such words
    report.py perfsplit               `perf script -F comm,ip,sym,dso` of one
                                      command on stdin -> where its samples
                                      went, by call chain: soft-RoCE (a frame
                                      in rxe_*: the NIC's work, done by the
                                      kernel in whatever process runs when a
                                      packet is handled), the /dev/fuse copy,
                                      TCP/IP, verbs syscalls, sleep/wakeup,
                                      other kernel, user space; then the
                                      hottest symbols and their callers
    report.py render RECORDS META OUT records (JSON lines written by bench.sh)
                                      and run metadata -> OUT/results.md,
                                      OUT/results.json, OUT/plot.png (gnuplot);
                                      prints the summary table and the ratios:
                                      per job and target the median of the
                                      rounds (records' "round") and their
                                      spread, half the range in % of the
                                      median; a ratio is the median of the
                                      per-round ratios
Only the Python standard library and gnuplot are used.
"""
import json
import os
import statistics
import subprocess
import sys

TARGETS = ["rpfs", "rpfs-fio", "tmpfs", "passthrough", "passthrough-hop", "glusterfs"]
TARGET_TITLE = {
    "rpfs": "rpfs FUSE",
    "rpfs-fio": "rpfs fio engine",
    "tmpfs": "tmpfs",
    "passthrough": "passthrough FUSE",
    "passthrough-hop": "passthrough + TCP hop",
    "glusterfs": "GlusterFS",
}
# One colour per target, the same in every panel of the plot (gnuplot's
# default cycle goes by column, and a panel leaves out a target without data).
TARGET_COLOR = {
    "rpfs": "#1f5fbf",
    "rpfs-fio": "#6fa8ff",
    "tmpfs": "#808080",
    "passthrough": "#2ca02c",
    "passthrough-hop": "#98df8a",
    "glusterfs": "#d62728",
}
WRITE_NOTE = ("Write rows are overwrites on every target: each sequential write job "
              "first writes its files once, unmeasured, then the measured run rewrites "
              "them (caches warm), so no target pays first-touch page faults of fresh "
              "memory; the random writes rewrite the 4-job sequential files.")
# job -> (title, headline metrics)
JOBS = [
    ("seqwrite1", "seq overwrite 1 MiB, 1 job", ["mbs"]),
    ("seqwrite4", "seq overwrite 1 MiB, 4 jobs", ["mbs"]),
    ("seqread1", "seq read 1 MiB, 1 job", ["mbs"]),
    ("seqread4", "seq read 1 MiB, 4 jobs", ["mbs"]),
    ("randread4", "rand read 4 KiB, 4 jobs", ["iops"]),
    ("randwrite4", "rand overwrite 4 KiB, 4 jobs", ["iops"]),
    ("md1", "metadata, 1 dir", ["create", "stat", "unlink"]),
    ("md100", "metadata, 100 dirs", ["create", "stat", "unlink"]),
]
UNIT = {"mbs": "MB/s", "iops": "IOPS", "create": "creates/s",
        "stat": "stats/s", "unlink": "unlinks/s"}


def fio_metrics(path):
    """Reduce a fio JSON result (group_reporting: one job) to metrics."""
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON document.
    d = json.loads(text[text.index("{"):])
    j = d["jobs"][0]
    io = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
    return {
        "mbs": io["bw_bytes"] / 1e6,
        "iops": io["iops"],
        "io_mb": io["io_bytes"] / 1e6,
        "usr": j["usr_cpu"],
        "sys": j["sys_cpu"],
        "runtime_s": io["runtime"] / 1000.0,
        "fio_error": j.get("error", 0),
    }


# Transport counters a run's record carries (differences over the run).
NET_KEYS = ["client_copy_bytes", "fuse_copy_bytes", "reg_count", "data_ops",
            "reg_cache_misses"]


def read_net(path):
    """Counters of a file: an rpfs.stats object, or the engine's JSON lines
    ({"job","cpu_usr_s","cpu_sys_s","net":{...}}, one per job process),
    summed. Returns (counters, engine CPU seconds or None)."""
    if path == "-":
        return {}, None
    with open(path) as f:
        text = f.read().strip()
    if text.startswith("{") and '"net":' not in text.split("\n")[0]:
        return json.loads(text), None
    tot, cpu = {}, 0.0
    for line in text.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        cpu += d.get("cpu_usr_s", 0) + d.get("cpu_sys_s", 0)
        for k, v in d["net"].items():
            if isinstance(v, (int, float)):
                tot[k] = tot.get(k, 0) + v
    return tot, cpu


def netdelta(before, after):
    """KEY=VALUE words of the counters that moved from before to after; a
    counter absent from after (fuse_copy_bytes of a build without it) is
    left out, so its column shows "-"."""
    a, _ = read_net(before)
    b, cpu = read_net(after)
    words = ["%s=%d" % (k, b[k] - a.get(k, 0)) for k in NET_KEYS if k in b]
    if cpu is not None:
        words.append("engine_cpu_s=%.3f" % cpu)
    return words


def net_columns(rec, io_bytes, engine):
    """[copies per byte moved, registrations per op, cache misses per op]
    of a record with netdelta's keys: copies are the client's user-space
    copies plus the kernel's copy through /dev/fuse (fuse_copy_bytes; none
    for the engine, which has no FUSE), per byte the application moved.
    "-" where a counter is missing or nothing was moved."""
    ops = rec.get("data_ops")
    fuse = 0 if engine else rec.get("fuse_copy_bytes")
    copy = rec.get("client_copy_bytes")
    cpb = "-" if copy is None or fuse is None or not io_bytes else \
        "%.2f" % ((copy + fuse) / float(io_bytes))
    per = lambda k: "-" if not ops or rec.get(k) is None else \
        "%.3f" % (rec[k] / float(ops))
    return [cpb, per("reg_count"), per("reg_cache_misses")]


def load_records(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    return recs


def fmt(v, metric=None):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if metric == "ratio":
        return "%.2f" % v
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---:" if i else ":---" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out)


def text_table(header, rows):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w[i]) if i else str(x).ljust(w[i])
                               for i, x in enumerate(r))
    return "\n".join([line(header), line(["-" * n for n in w])] + [line(r) for r in rows])


def main_runs(recs):
    """(job, target) -> the records of the main section, one per round
    (a record without "round" is round 1), in round order."""
    runs = {}
    for r in recs:
        if r.get("section") == "main":
            runs.setdefault((r["job"], r["target"]), []).append(r)
    for v in runs.values():
        v.sort(key=lambda r: int(r.get("round", 1)))
    return runs


def by_round(runs, met):
    """round -> value of metric met, over the records runs that did not
    fail."""
    return {int(r.get("round", 1)): r[met] for r in runs
            if not r.get("error") and r.get(met) is not None}


def spread_pct(vals):
    """Half the range of vals in % of their median (the ± of a cell), or
    None for fewer than two values or a median of 0."""
    med = statistics.median(vals)
    if len(vals) < 2 or not med:
        return None
    return 100.0 * (max(vals) - min(vals)) / 2 / abs(med)


def median_cell(vals, n, metric=None):
    """A summary cell: the median of vals, "±P%" (spread_pct) with two
    values or more, and "(k/n)" when only k of the n runs gave one."""
    s = fmt(statistics.median(vals), metric)
    p = spread_pct(vals)
    if p is not None:
        s += " ±%.0f%%" % p
    if len(vals) < n:
        s += " (%d/%d)" % (len(vals), n)
    return s


def ratio_of_rounds(a, b):
    """The per-round ratios a[r] / b[r] of the rounds both have (a, b:
    round -> value), in round order."""
    return [a[r] / b[r] for r in sorted(a) if r in b and b[r]]


def main_medians(recs):
    """(job, target) -> {metric: median over the rounds} of the main
    section (the plot's figures)."""
    out = {}
    for key, runs in main_runs(recs).items():
        mets = {}
        for met in ("mbs", "iops", "create", "stat", "unlink"):
            v = list(by_round(runs, met).values())
            if v:
                mets[met] = statistics.median(v)
        out[key] = mets
    return out


def summary_title(meta):
    """The line above the summary table: what a cell and a ratio are."""
    n = int(meta.get("rounds", 1))
    if n == 1:
        return ("Summary: 1 round per job and target (no spread: run more with --rounds); "
                "ratios of that round")
    return ("Summary: median of %d rounds per job and target, ±spread = half the range of "
            "the rounds, (max - min) / 2, in %% of the median; ratios: median of the %d "
            "per-round ratios, ± likewise" % (n, n))


def summary(recs, meta):
    """Headline table: one row per job metric, one column per target, plus
    the ratios rpfs/passthrough and rpfs/GlusterFS, and against the
    passthrough with a TCP hop: rpfs/hop and hop/passthrough (on 4 KiB
    random reads, the share of the passthrough that a design with a server
    hop reached in this run; bench_hop.c says where it is no ceiling).
    A target's cell is the median of its rounds with their spread
    (median_cell); a ratio is the median of the per-round ratios.
    Columns: the targets of meta["targets"] (default all).
    ratios holds (row title, rpfs/passthrough, rpfs/GlusterFS, rpfs/hop,
    hop/passthrough), each a median, None where a figure is missing."""
    runs = main_runs(recs)
    n = int(meta.get("rounds", 1))
    targets = [t for t in TARGETS if t in meta.get("targets", TARGETS)]
    header = ["job", "unit"] + [TARGET_TITLE[t] for t in targets] + \
        ["rpfs/passthrough", "rpfs/GlusterFS", "rpfs/hop", "hop/passthrough"]
    rows, ratios = [], []
    for job, title, metrics in JOBS:
        if not any(k[0] == job for k in runs):
            continue
        for met in metrics:
            row = [title if len(metrics) == 1 else "%s: %s" % (title, met), UNIT[met]]
            vals = {}
            for t in targets:
                rs = runs.get((job, t), [])
                if t == "rpfs-fio" and not meta.get("fio_engine"):
                    row.append("not built yet")
                    continue
                vals[t] = by_round(rs, met)
                if not rs:
                    row.append("-")
                elif not vals[t]:
                    row.append("failed")
                else:
                    row.append(median_cell(list(vals[t].values()), n))
            row_ratios = [title if len(metrics) == 1 else "%s: %s" % (title, met)]
            for a, b in (("rpfs", "passthrough"), ("rpfs", "glusterfs"),
                         ("rpfs", "passthrough-hop"), ("passthrough-hop", "passthrough")):
                q = ratio_of_rounds(vals.get(a, {}), vals.get(b, {}))
                row.append(median_cell(q, len(q), "ratio") if q else "-")
                row_ratios.append(statistics.median(q) if q else None)
            rows.append(row)
            ratios.append(tuple(row_ratios))
    return header, rows, ratios


def details(recs):
    """Every run of the main section, one row per round: all metrics, fio
    CPU, daemon CPU, and for rpfs the client's copies per byte and
    registrations and cache misses per operation (net_columns)."""
    header = ["job", "target", "round", "MB/s", "IOPS", "create/s", "stat/s", "unlink/s",
              "fio usr %", "fio sys %", "daemon CPU s", "wall s", "copies/B",
              "regs/op", "misses/op"]
    rows = []
    order = {j[0]: i for i, j in enumerate(JOBS)}
    for r in sorted((r for r in recs if r.get("section") == "main"),
                    key=lambda r: (order.get(r["job"], 99), int(r.get("round", 1)),
                                   TARGETS.index(r["target"]))):
        rnd = str(r.get("round", 1))
        if r.get("error"):
            rows.append([r["job"], r["target"], rnd, "failed: " + r["error"]] + ["-"] * 11)
            continue
        fio = r["kind"] == "fio"
        rows.append([r["job"], r["target"], rnd,
                     fmt(r.get("mbs")) if fio else "-",
                     fmt(r.get("iops")) if fio else "-",
                     fmt(r.get("create")), fmt(r.get("stat")), fmt(r.get("unlink")),
                     fmt(r.get("usr")), fmt(r.get("sys")),
                     fmt(r.get("daemon_cpu_s")), fmt(r.get("wall_s"))] +
                    (net_columns(r, r.get("io_mb", 0) * 1e6, r["target"] == "rpfs-fio")
                     if fio and r["target"].startswith("rpfs") else ["-"] * 3))
    return header, rows


def sweeps(recs):
    """Stripe unit and iod count sweeps (rpfs only, MB/s)."""
    out = {}
    for sec in ("unit", "iods"):
        pts = {}
        for r in recs:
            if r.get("section") != sec or r.get("error"):
                continue
            pts.setdefault(r["param"], {})[r["job"]] = r
        out[sec] = pts
    return out


def sweep_table(pts, label):
    header = [label, "seq overwrite MB/s", "seq read MB/s", "write daemon CPU s",
              "read daemon CPU s"]
    rows = []
    for p in sorted(pts, key=int):
        w, r = pts[p].get("seqwrite1"), pts[p].get("seqread1")
        show = ("%d KiB" % (int(p) // 1024)) if label == "stripe unit" else str(p)
        rows.append([show, fmt(w and w["mbs"]), fmt(r and r["mbs"]),
                     fmt(w and w.get("daemon_cpu_s")), fmt(r and r.get("daemon_cpu_s"))])
    return header, rows


def plot(recs, meta, outdir):
    """Four panels: sequential MB/s, random IOPS, metadata ops/s (log), and
    the two sweeps; the main figures are the medians of the rounds. Data
    goes to OUT/plot-data/, the picture to plot.png."""
    m = main_medians(recs)
    ddir = os.path.join(outdir, "plot-data")
    os.makedirs(ddir, exist_ok=True)
    targets = [t for t in TARGETS if t != "rpfs-fio" or meta.get("fio_engine")]

    cols_of = {}

    def write(name, items):
        """One histogram's data; a target without a single valid value in
        it is left out (gnuplot refuses a column with no valid point)."""
        def val(t, job, met):
            return m.get((job, t), {}).get(met)
        cols = [t for t in targets if any(val(t, j, met) is not None for _, j, met in items)]
        cols_of[name] = cols
        with open(os.path.join(ddir, name), "w") as f:
            f.write("label " + " ".join('"%s"' % TARGET_TITLE[t] for t in cols) + "\n")
            for label, job, met in items:
                vals = [val(t, job, met) for t in cols]
                f.write('"%s" %s\n' % (label, " ".join(
                    "%.3f" % v if v is not None else "NaN" for v in vals)))

    write("seq.dat", [("overwrite 1j", "seqwrite1", "mbs"), ("overwrite 4j", "seqwrite4", "mbs"),
                      ("read 1j", "seqread1", "mbs"), ("read 4j", "seqread4", "mbs")])
    write("rand.dat", [("randread", "randread4", "iops"), ("randoverwrite", "randwrite4", "iops")])
    write("md.dat", [("%s %s" % (ph, d), job, ph) for job, d in (("md1", "1dir"), ("md100", "100dirs"))
                     for ph in ("create", "stat", "unlink")])
    sw = sweeps(recs)
    for sec in ("unit", "iods"):
        with open(os.path.join(ddir, "sweep-%s.dat" % sec), "w") as f:
            for p in sorted(sw[sec], key=int):
                w = sw[sec][p].get("seqwrite1")
                r = sw[sec][p].get("seqread1")
                x = int(p) // 1024 if sec == "unit" else int(p)
                f.write("%d %s %s\n" % (x, "%.3f" % w["mbs"] if w else "NaN",
                                        "%.3f" % r["mbs"] if r else "NaN"))
    _, _, ratios = summary(recs, meta)
    with open(os.path.join(ddir, "ratio.dat"), "w") as f:
        f.write('label "rpfs / passthrough" "rpfs / GlusterFS"\n')
        for name, a, b, _, _ in ratios:
            short = (name.replace("seq overwrite 1 MiB, ", "sw ").replace("seq read 1 MiB, ", "sr ")
                     .replace("rand read 4 KiB, 4 jobs", "randread").replace("rand overwrite 4 KiB, 4 jobs", "randwrite")
                     .replace("metadata, 1 dir: ", "md1 ").replace("metadata, 100 dirs: ", "md100 ")
                     .replace(" jobs", "j").replace(" job", "j"))
            f.write('"%s" %s %s\n' % (short, "%.3f" % a if a else "NaN", "%.3f" % b if b else "NaN"))
    # not_run: the plot command of a panel without data (bench.sh --only
    # main, --jobs, --targets): a note instead of a gnuplot error.
    not_run = ("set label 1 'not in this run' at graph 0.5,0.5 center\n"
               "plot [1:10][1:10] NaN notitle\nunset label 1")

    def hist(f, cols=None):
        """The histogram of data file f, each column in its target's colour
        (cols: (column, colour) pairs, default every column of f; the ratio
        panel: in the colour of the target rpfs is compared to)."""
        if cols is None:
            cols = [(i + 2, TARGET_COLOR[t])
                    for i, t in enumerate(cols_of[os.path.basename(f)])]
        if not cols:
            return not_run
        return "plot " + ", ".join("'%s' using %d:xtic(1) title columnhead(%d) lc rgb '%s'" %
                                   (f, i, i, c) for i, c in cols)

    def sweep_plot(sec):
        """The lines of sweep sec (unit, iods), or not_run without points."""
        if not sw[sec]:
            return not_run
        f = os.path.join(ddir, "sweep-%s.dat" % sec)
        return ("plot '{f}' using 1:2 title 'overwrite' lw 2 pt 7 lc rgb '{c}', \\\n"
                "     '{f}' using 1:3 title 'read' lw 2 pt 5 dt 2 lc rgb '{c}'"
                .format(f=f, c=TARGET_COLOR["rpfs"]))
    # the ratio columns with a figure (gnuplot refuses one without)
    ratio_cols = [(i + 2, TARGET_COLOR[t]) for i, t in enumerate(("passthrough", "glusterfs"))
                  if any(x[i + 1] for x in ratios)]
    script = """
set terminal pngcairo size 1800,1100 font 'DejaVu Sans,10'
set output '{out}'
set multiplot layout 2,3 title "{title}" font ',12'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key below horizontal font ',9'
set grid ytics
set yrange [0:*]
set title 'Sequential 1 MiB (MB/s)'
{seq}
set title 'Random 4 KiB, 4 jobs (IOPS, log scale)'
set logscale y
set yrange [100:*]
{rand}
set title 'Metadata, {mdfiles} files (ops/s, log scale)'
set yrange [10:*]
set xtics rotate by -30
{md}
unset logscale y
set xtics norotate
set yrange [0:*]
set style data linespoints
set key inside top right
set title 'rpfs: stripe unit sweep, 4 iods, seq 1 MiB, 1 job (MB/s)'
set xlabel 'stripe unit (KiB)'
set logscale x 2
set xrange [48:1400]
set xtics (64, 256, 1024)
{sweep_unit}
unset logscale x
set title 'rpfs: iod count sweep, default layout, seq 1 MiB, 1 job (MB/s)'
set xlabel 'iods'
set xrange [0.5:4.5]
set xtics (1, 2, 4)
{sweep_iods}
unset xlabel
set autoscale x
set xtics autofreq rotate by -45 font ',8'
set style data histograms
set key below horizontal
set title 'Ratios, rpfs FUSE / other (above 1: rpfs faster)'
set yrange [0:*]
{ratio}
unset multiplot
""".format(out=os.path.join(outdir, "plot.png"),
           title="rpfs bench %s, %s mode  (%s)" % (meta.get("date", ""), meta.get("mode", ""),
                                                   meta.get("machine_short", "")),
           seq=hist(os.path.join(ddir, "seq.dat")), rand=hist(os.path.join(ddir, "rand.dat")),
           md=hist(os.path.join(ddir, "md.dat")),
           ratio=hist(os.path.join(ddir, "ratio.dat"), ratio_cols) +
           (", 1 with lines lc rgb 'black' dt 2 notitle" if ratio_cols else ""),
           mdfiles="{:,}".format(int(meta.get("md_files", 10000))),
           sweep_unit=sweep_plot("unit"), sweep_iods=sweep_plot("iods"))
    gp = os.path.join(ddir, "plot.gp")
    with open(gp, "w") as f:
        f.write(script)
    res = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write("report.py: gnuplot failed:\n" + res.stderr)
        return False
    return True


def render(records, metapath, outdir):
    recs = load_records(records)
    with open(metapath) as f:
        meta = json.load(f)
    sh, srows, ratios = summary(recs, meta)
    dh, drows = details(recs)
    sw = sweeps(recs)
    uh, urows = sweep_table(sw["unit"], "stripe unit")
    ih, irows = sweep_table(sw["iods"], "iods")

    md = ["# rpfs benchmark, %s" % meta.get("date", ""), ""]
    md.append("Mode: %s. Command: `%s`. Total run time: %s s." %
              (meta.get("mode"), meta.get("command"), meta.get("elapsed_s", "?")))
    md += ["", "## Machine and versions", ""]
    for k in ("machine", "kernel", "rpfs", "fio", "glusterfs", "libfuse", "compiler",
              "pipe_max_size", "passthrough_splice", "fio_engine", "loadavg_at_end"):
        md.append("- %s: %s" % (k, meta.get(k) if meta.get(k) not in (None, "") else "-"))
    md += ["", "## Method", "", meta.get("method", ""), "",
           "## Summary (higher is better)", "", summary_title(meta) + ".", "",
           md_table(sh, srows), "", WRITE_NOTE, "",
           "## Every run", "",
           "One row per round. fio usr/sys: fio's own CPU use in percent (group reported). "
           "daemon CPU s: user+system CPU seconds used during the run by the "
           "target's server processes alone, all threads of each (utime+stime of "
           "/proc/PID/stat, summed over the processes, before and after the run): "
           "rpfs and rpfs fio engine: rpfs-mgr, rpfs-iod*, rpfs-fuse; passthrough and "
           "passthrough + TCP hop: its daemon (hop server threads included); "
           "GlusterFS: glusterfsd bricks and the glusterfs FUSE client; tmpfs: no "
           "server process, \"-\". Not machine-wide: other processes, and the "
           "kernel's work in fio's own system calls (fio sys), are not in it.", "",
           md_table(dh, drows), "",
           "## Sweeps (rpfs only, sequential 1 MiB, 1 job)", "",
           "Stripe unit, on the 4-iod cluster (layout set with `user.rpfs.layout` on "
           "a fresh directory, count=4):", "", md_table(uh, urows), "",
           "Number of iods (one cluster each, default layout: unit 64 KiB, count = all iods):",
           "", md_table(ih, irows), "", "![plot](plot.png)", ""]
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"meta": meta, "summary": {"title": summary_title(meta), "header": sh,
                                             "rows": srows}, "records": recs}, f, indent=1)
    ok = plot(recs, meta, outdir)

    print(summary_title(meta) + ":")
    print(text_table(sh, srows))
    print(WRITE_NOTE)
    print()
    if urows or irows:
        print("Stripe unit sweep (rpfs, 4 iods):")
        print(text_table(uh, urows))
        print("iod sweep (rpfs, default layout):")
        print(text_table(ih, irows))
        print()
    print("Ratios (rpfs FUSE / other, %s; >1 means rpfs is faster):" %
          ("median of the per-round ratios" if int(meta.get("rounds", 1)) > 1 else "1 round"))
    for name, a, b, c, d in ratios:
        print("  %-36s rpfs/passthrough %6s   rpfs/GlusterFS %6s   rpfs/hop %6s   "
              "hop/passthrough %6s" %
              (name, fmt(a, "ratio"), fmt(b, "ratio"), fmt(c, "ratio"), fmt(d, "ratio")))
    print()
    print("results: %s/results.md, results.json%s" %
          (outdir, ", plot.png" if ok else " (plot failed)"))
    return 0


def record(kind, path, pairs):
    """One record line: metrics of a fio or mdbench result (kind none: no
    file) merged with KEY=VALUE pairs (numbers become numbers)."""
    rec = {}
    if kind == "fio":
        rec.update(fio_metrics(path))
    elif kind == "md":
        with open(path) as f:
            rec.update(json.loads(f.read().strip().splitlines()[-1]))
    for p in pairs:
        k, _, v = p.partition("=")
        try:
            rec[k] = float(v) if "." in v or "e" in v.lower() else int(v)
        except ValueError:
            rec[k] = v
    rec["kind"] = rec.get("kind", kind)
    return rec


# Classes of perf_split(), in priority order: a sample belongs to the first
# class one of whose prefixes starts a frame of its call chain ("user": no
# kernel frame at all).
PERF_CLASSES = [
    ("soft-RoCE", ("rxe_",)),
    ("/dev/fuse copy", ("fuse_copy",)),
    ("tcp/ip", ("tcp_", "inet_", "ip_", "__ip_", "sock_", "__sys_sendmsg", "__sys_recvmsg")),
    ("verbs syscalls", ("ib_uverbs",)),
    ("sleep/wakeup", ("schedule", "__schedule", "futex_", "try_to_wake_up", "__wake_up", "do_epoll_wait")),
    ("other kernel", ("",)),
]


def perf_split(lines):
    """Classify `perf script -F comm,ip,sym,dso` samples (a header line,
    then one frame per line, leaf first; a blank line between samples) by
    their call chains (PERF_CLASSES; "user" when no frame is the kernel's).
    Returns (samples, {class: count}, {leaf symbol: count},
    {leaf symbol: {caller chain: count}})."""
    counts = {}
    leaves = {}
    chains = {}
    total = 0
    frames = None

    def close(fr):
        if not fr:
            return 0
        syms = []
        kernel = False
        for f in fr:
            w = f.split()
            sym = w[1] if len(w) > 1 else "?"
            syms.append(sym)
            kernel = kernel or "kernel.kallsyms" in f
        cls = "user"
        if kernel:
            for name, prefixes in PERF_CLASSES:
                if any(x.startswith(p) for x in syms for p in prefixes):
                    cls = name
                    break
        counts[cls] = counts.get(cls, 0) + 1
        leaves[syms[0]] = leaves.get(syms[0], 0) + 1
        ch = ";".join(reversed(syms[1:7]))
        chains.setdefault(syms[0], {})
        chains[syms[0]][ch] = chains[syms[0]].get(ch, 0) + 1
        return 1

    for line in lines:
        if not line.strip():
            total += close(frames)
            frames = None
        elif line[0] not in " \t":
            total += close(frames)
            frames = []
        elif frames is not None:
            frames.append(line.strip())
    total += close(frames)
    return total, counts, leaves, chains


def print_perf_split(total, counts, leaves, chains):
    """The summary of perf_split(): classes, then the 6 hottest leaf
    symbols with the 2 commonest chains of callers of each (6 deep)."""
    if not total:
        print("no samples")
        return
    print("samples %d: %s" % (total, ", ".join(
        "%s %.1f%%" % (k, 100.0 * v / total)
        for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))))
    for sym, n in sorted(leaves.items(), key=lambda kv: -kv[1])[:6]:
        print("  %5.1f%% %s" % (100.0 * n / total, sym))
        for ch, m in sorted(chains[sym].items(), key=lambda kv: -kv[1])[:2]:
            print("         %5.1f%% from %s" % (100.0 * m / total, ch or "-"))


def main(argv):
    if len(argv) == 2 and argv[1] == "perfsplit":
        print_perf_split(*perf_split(sys.stdin))
        return 0
    if len(argv) >= 4 and argv[1] == "record":
        print(json.dumps(record(argv[2], argv[3], argv[4:])))
        return 0
    if len(argv) == 3 and argv[1] == "fio":
        print(json.dumps(fio_metrics(argv[2])))
        return 0
    if len(argv) == 4 and argv[1] == "netdelta":
        print(" ".join(netdelta(argv[2], argv[3])))
        return 0
    if len(argv) >= 3 and argv[1] == "netcols":
        rec = record("none", "-", argv[3:])
        print(" ".join(net_columns(rec, float(argv[2]), "engine_cpu_s" in rec)))
        return 0
    if len(argv) == 5 and argv[1] == "render":
        return render(argv[2], argv[3], argv[4])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
