#!/usr/bin/env python3
"""mdmatrix.py - the metadata matrix, scrape-cost and seal-cost tables of
scripts/bench.sh.

    mdmatrix.py snap URL MOUNT PREFIX WHAT PHASE
        wait until the reaper of the rpfs mount at MOUNT has removed and
        purged every freed inode queued to it (its rpfs.stats:
        reap_inodes reaches reap_queued; at most $RPFS_BENCH_REAP_WAIT
        seconds, default 60, then fail saying so), then fetch the mgr's
        /metrics at URL and write its per-op request counters
        (rpfs_server_requests_total{op}), its store commit count
        (rpfs_mgr_store_commit_seconds_count) and the reaper's counts as
        JSON to PREFIX.WHAT.PHASE.json (bench-md's -H hook: WHAT is start
        or end; workload.py's jobs use it too, PHASE naming the job)
    mdmatrix.py record MDJSON PREFIX KEY=VALUE...
        one record line: bench-md's rates, and per phase the mgr requests
        and commits per op (end minus start snapshot, over the files) and
        the freed inodes the mount reaped per op, merged with KEY=VALUE
    mdmatrix.py table RECORDS OUT.md
        print the side-by-side table of the matrix records and write it
    mdmatrix.py scrape-table RECORDS OUT.md
        per job, the median of the runs without scraping and with it,
        their ratio and the spread of the runs without it (the noise)
    mdmatrix.py seal-table RECORDS OUT.md
        the same for --seal-cost: no key, sealed, sealed and encrypted

Nothing here asserts a timing.
"""
import json
import os
import re
import statistics
import sys
import time
import urllib.request

PHASES = ["create", "stat", "rename", "unlink", "mkdir", "rmdir"]
REQ_RE = re.compile(r'^rpfs_server_requests_total\{op="([^"]+)"\} (\d+)$')
COMMIT_RE = re.compile(r'^rpfs_mgr_store_commit_seconds_count(?:\{\})? (\d+)$')


def parse_metrics(text):
    """The per-op request counts and the commit count (None when the mgr
    exports no commit histogram) of one /metrics page."""
    req, commits = {}, None
    for line in text.splitlines():
        m = REQ_RE.match(line)
        if m:
            req[m.group(1)] = int(m.group(2))
            continue
        m = COMMIT_RE.match(line)
        if m:
            commits = int(m.group(1))
    return {"requests": req, "commits": commits}


def reap_counts(mount):
    """(reap_queued, reap_inodes) of the rpfs mount at MOUNT: the freed
    inodes queued to its reaper (fuse-client/core/cli_reap.c) so far, and those
    it has removed and purged (or left as orphans after a failure)."""
    st = json.loads(os.getxattr(mount, "user.rpfs.stats"))
    if "reap_queued" not in st or "reap_inodes" not in st:
        sys.exit("mdmatrix.py snap: %s: rpfs.stats has no reap_queued/reap_inodes: "
                 "cannot tell when the reaper's purges are done (a mount of an older build?)"
                 % mount)
    return st["reap_queued"], st["reap_inodes"]


def wait_reaped(mount, what, phase):
    """Wait until the reaper of MOUNT has nothing left to remove and purge,
    so that the mgr's counts read next hold every PURGE/PURGE_MANY of the
    unlinks before (an unlink queues its inode before it answers, and the
    reaper counts an inode only after its purge's answer: the mgr counts a
    request before it answers). The reaper drains a burst of thousands of
    unlinks in well under a second; after $RPFS_BENCH_REAP_WAIT seconds
    (default 60) it is taken as stuck and the snapshot fails, naming the
    count left. Returns (queued, reaped)."""
    limit = float(os.environ.get("RPFS_BENCH_REAP_WAIT", "60"))
    deadline = time.monotonic() + limit
    while True:
        queued, reaped = reap_counts(mount)
        if reaped >= queued:
            return queued, reaped
        if time.monotonic() >= deadline:
            sys.exit("mdmatrix.py snap: %s %s: after %g s the reaper of %s still has %d freed "
                     "inodes to remove and purge (reap_queued %d, reap_inodes %d); the mgr's "
                     "counts would miss their purges" %
                     (what, phase, limit, mount, queued - reaped, queued, reaped))
        time.sleep(0.01)


def snap(url, mount, prefix, what, phase):
    """Once MOUNT's reaper is done (wait_reaped), fetch URL and write its
    counters and the reaper's to PREFIX.WHAT.PHASE.json."""
    if what not in ("start", "end") or not re.fullmatch(r"[a-z][a-z0-9-]*", phase):
        sys.exit("mdmatrix.py snap: expected start|end and a phase (a bench-md phase or a "
                 "workload job: lower case letters, digits, -), got %r %r" % (what, phase))
    queued, reaped = wait_reaped(mount, what, phase)
    with urllib.request.urlopen(url, timeout=10) as r:
        data = parse_metrics(r.read().decode("utf-8", "replace"))
    data["reap_queued"], data["reap_inodes"] = queued, reaped
    with open("%s.%s.%s.json" % (prefix, what, phase), "w") as f:
        json.dump(data, f)


def phase_delta(prefix, phase, files):
    """Requests per op (with the ops that make it up), commits per op and
    freed inodes reaped per op of one phase, or None without both
    snapshots."""
    try:
        with open("%s.start.%s.json" % (prefix, phase)) as f:
            a = json.load(f)
        with open("%s.end.%s.json" % (prefix, phase)) as f:
            b = json.load(f)
    except OSError:
        return None
    ops = {op: n - a["requests"].get(op, 0) for op, n in b["requests"].items()}
    ops = {op: round(d / files, 2) for op, d in ops.items() if d > 0}
    out = {"req_per_op": round(sum(ops.values()), 2), "req_ops": ops}
    if a["commits"] is not None and b["commits"] is not None:
        out["commits_per_op"] = round((b["commits"] - a["commits"]) / files, 2)
    if "reap_inodes" in a and "reap_inodes" in b:
        out["reaped_per_op"] = round((b["reap_inodes"] - a["reap_inodes"]) / files, 2)
    return out


def record(mdjson, prefix, pairs):
    """One JSON line: bench-md's last line, the phases' deltas, PAIRS."""
    with open(mdjson) as f:
        rec = json.loads(f.read().strip().splitlines()[-1])
    for ph in PHASES:
        if ph in rec:
            d = phase_delta(prefix, ph, rec["files"])
            if d:
                rec[ph + "_mgr"] = d
    for p in pairs:
        k, _, v = p.partition("=")
        rec[k] = v
    print(json.dumps(rec))


def load(path):
    """The records of a JSON-lines file."""
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def job_name(r):
    """The job of a matrix record: its processes and directories."""
    procs = int(r["procs"])
    if procs == 1:
        return "1 client"
    return "%d clients, %s" % (procs, "own dirs" if int(r["own_dir"]) else "one dir")


def cell(r, ph, ref):
    """One table cell: ops/s, requests and commits per op, ratio to REF."""
    if r is None or "error" in r:
        return "failed" if r is not None else "-"
    if ph not in r:
        return "-"
    s = "%.0f/s" % r[ph]
    m = r.get(ph + "_mgr")
    if m:
        s += " %.1f req" % m["req_per_op"]
        if "commits_per_op" in m:
            s += " %.2f cmt" % m["commits_per_op"]
    if ref and ph in ref and ref[ph] > 0 and r is not ref:
        s += " (%.2fx)" % (r[ph] / ref[ph])
    return s


def table(path, outmd):
    """Print and write the side-by-side matrix table."""
    recs = load(path)
    targets = []
    for r in recs:
        if r["target"] not in targets:
            targets.append(r["target"])
    jobs = []
    for r in recs:
        if job_name(r) not in jobs:
            jobs.append(job_name(r))
    by = {(job_name(r), r["target"]): r for r in recs}
    head = ["op", "clients"] + targets
    rows = []
    for job in jobs:
        ref = by.get((job, "passthrough"))
        for ph in PHASES:
            if not any(ph in (by.get((job, t)) or {}) for t in targets):
                continue
            rows.append([ph, job] + [cell(by.get((job, t)), ph, ref) for t in targets])
    notes = sorted({"%s: %s" % (r["target"], r.get("state", "")) for r in recs if r.get("state")})
    legend = ("ops/s of all clients together; req = mgr requests per op "
              "(rpfs_server_requests_total); cmt = store write commits (syncs) per op "
              "(rpfs_mgr_store_commit_seconds count; absent: not exported); "
              "(x) = ratio to the passthrough")
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    lines = [fmt % tuple(head)] + [fmt % tuple(r) for r in rows]
    print("Metadata matrix: " + legend)
    for n in notes:
        print("  state of " + n)
    print("\n".join(lines))
    with open(outmd, "w") as f:
        f.write("# Metadata matrix\n\n%s.\n\n" % legend)
        for n in notes:
            f.write("- state of %s\n" % n)
        f.write("\n| %s |\n|%s|\n" % (" | ".join(head), "|".join("---" for _ in head)))
        for r in rows:
            f.write("| %s |\n" % " | ".join(r))
        f.write("\nPer-op requests by op:\n\n")
        for r in recs:
            for ph in PHASES:
                m = r.get(ph + "_mgr")
                if m:
                    f.write("- %s, %s, %s: %s\n" % (r["target"], job_name(r), ph,
                                                    json.dumps(m["req_ops"])))


def scrape_values(r):
    """(metric, value) pairs of one bench.sh record of --scrape-cost: MB/s
    of a sequential job, IOPS of a random one, the rates of the metadata
    job, and the daemons' CPU seconds of each."""
    out = []
    if r.get("kind") == "md":
        out = [(ph + "/s", r[ph]) for ph in ("create", "stat", "unlink") if ph in r]
    elif "mbs" in r:
        out = [("MB/s", r["mbs"])] if r["job"].startswith("seq") else [("IOPS", r["iops"])]
    if "daemon_cpu_s" in r:
        out.append(("daemon cpu s", r["daemon_cpu_s"]))
    return out


def cost_table(path, outmd, title, base, others):
    """Per job and metric: the median of the runs with param base, and of
    each param in others with its ratio to base; then the noise: the
    largest ratio between two runs of one param, minus 1."""
    params = [base] + others
    vals, keys = {}, []
    for r in load(path):
        if r.get("param") not in params or "error" in r:
            continue
        for met, v in scrape_values(r):
            if (r["job"], met) not in keys:
                keys.append((r["job"], met))
            vals.setdefault((r["job"], met, r["param"]), []).append(float(v))
    head = ["job", "metric", "runs", "%s (median)" % base]
    for o in others:
        head += ["%s (median)" % o, "%s/%s" % (o, base)]
    head += ["%s spread (noise)" % base] + ["%s spread" % o for o in others]
    rows = []
    for job, met in keys:
        got = [vals.get((job, met, p), []) for p in params]
        runs = "+".join(str(len(g)) for g in got)
        if any(not g or min(g) <= 0 for g in got):
            rows.append([job, met, runs] + ["-"] * (len(head) - 3))
            continue
        med = [statistics.median(g) for g in got]
        row = [job, met, runs, "%.2f" % med[0]]
        for m in med[1:]:
            row += ["%.2f" % m, "%.3f" % (m / med[0])]
        row += ["%.1f %%" % (100 * (max(g) / min(g) - 1)) for g in got]
        rows.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    print("\n".join([fmt % tuple(head)] + [fmt % tuple(r) for r in rows]))
    with open(outmd, "w") as f:
        f.write("# %s\n\n| %s |\n|%s|\n" %
                (title, " | ".join(head), "|".join("---" for _ in head)))
        for r in rows:
            f.write("| %s |\n" % " | ".join(r))


def scrape_table(path, outmd):
    """--scrape-cost: runs without scraping (off) and with it (on)."""
    cost_table(path, outmd, "What scraping costs", "off", ["on"])


def seal_table(path, outmd):
    """--seal-cost: no key (off), sealed (mac), sealed and encrypted (enc)."""
    cost_table(path, outmd, "What sealing costs (off: no key; mac: a key, TCP streams "
               "sealed; enc: encrypted too)", "off", ["mac", "enc"])


def main(argv):
    if len(argv) == 7 and argv[1] == "snap":
        snap(*argv[2:7])
    elif len(argv) >= 4 and argv[1] == "record":
        record(argv[2], argv[3], argv[4:])
    elif len(argv) == 4 and argv[1] == "table":
        table(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "scrape-table":
        scrape_table(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "seal-table":
        seal_table(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
