#!/usr/bin/python3
"""workload.py - the small-file workload of scripts/bench.sh (--only
workload): its source-like tree, its manifests, its records and its table.

    workload.py tree DIR NFILES SEED
        make DIR (which must not exist) holding a source-like tree of
        NFILES files in max(1, NFILES // 25) directories below DIR, nested
        up to 6 levels; file sizes 0..64 KiB, skewed small (a log-normal
        of median 2.5 KiB: about 85 % under 8 KiB; 3 % empty), text made
        of source-like lines, 3 % of the files executable, fixed mtimes.
        The same NFILES and SEED make the same tree, byte for byte (names,
        sizes, contents, modes, mtimes). Prints one JSON line: files,
        dirs, bytes, entries (files + directories, DIR included).
    workload.py manifest DIR OUT
        write to OUT one line per entry below DIR (DIR itself as "."),
        sorted: path, type (d, f, l), mode (octal), size, mtime (files
        only, else -) and the sha256 of the contents (files only, else -).
        Two trees are equal when their manifests are.
    workload.py record PREFIX PHASE ENTRIES SECONDS KEY=VALUE...
        one record line of a timed job: its seconds, its entries and, when
        mdmatrix.py snap left PREFIX.start.PHASE.json and
        PREFIX.end.PHASE.json, the mgr's requests and store commits per
        entry (mdmatrix.phase_delta), merged with KEY=VALUE
    workload.py mdrecords MDJSON PREFIX JOBSUFFIX KEY=VALUE...
        the three records (create, stat, unlink) of one bench-md run: job
        PHASE-JOBSUFFIX, seconds = files / rate, the mgr's counts per file
        from the hook's snapshots
    workload.py table RECORDS OUT.md NOTE...
        print the table of the records and write it with the NOTEs (one
        line each) to OUT.md: per job the median time of the rounds on
        each target, its spread, and beside each rpfs target the mgr's
        requests and store commits per entry and the ratio to the
        passthrough (the median of the per-round ratios)

Only the Python standard library. Nothing here asserts a timing.
"""
import hashlib
import json
import math
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mdmatrix  # noqa: E402
import report  # noqa: E402

MAX_DEPTH = 6
MAX_SIZE = 64 * 1024
MTIME0 = 1700000000
WORDS = ("core util net proto io cache store meta log test lib src include doc "
         "server client daemon buf queue lock map hash tree list path name attr "
         "file dir inode stripe layout conf opt main ops batch txn kv fuse").split()
EXTS = ((".c", 30), (".h", 20), (".py", 12), (".md", 6), (".txt", 4), (".json", 4),
        (".go", 8), (".rs", 8), (".js", 6), (".sh", 2))
JOBS = ["untar", "clone", "cp-a", "rm-rf"]
MD_JOBS = [("1", "1 proc"), ("4", "4 procs, one dir"), ("4own", "4 procs, own dirs")]
JOB_TITLE = {"untar": "tar x", "clone": "git clone", "cp-a": "cp -a", "rm-rf": "rm -rf (both trees)"}
for _suf, _what in MD_JOBS:
    for _ph in ("create", "stat", "unlink"):
        JOBS.append("%s-%s" % (_ph, _suf))
        JOB_TITLE["%s-%s" % (_ph, _suf)] = "%s, %s" % (_ph, _what)


def text_pool(rng, size):
    """SIZE bytes of source-like lines from RNG: indented statements built
    from WORDS, comments, braces and blank lines."""
    out, n = [], 0
    while n < size:
        k = rng.random()
        ind = "\t" * rng.randrange(0, 4)
        if k < 0.1:
            line = ""
        elif k < 0.25:
            line = ind + "/* " + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12))) + " */"
        elif k < 0.35:
            line = ind + rng.choice(("}", "{", "return 0;", "break;", "} else {"))
        else:
            a, b, c = rng.choice(WORDS), rng.choice(WORDS), rng.choice(WORDS)
            line = ind + rng.choice(("%s_%s(%s, %d);" % (a, b, c, rng.randrange(100)),
                                     "if (%s->%s < %d)" % (a, b, rng.randrange(4096)),
                                     "%s = %s_%s(%s);" % (a, b, c, a),
                                     "static int %s_%s(struct %s *%s)" % (a, b, c, c[0])))
        out.append(line)
        n += len(line) + 1
    return ("\n".join(out) + "\n").encode()[:size]


def file_size(rng):
    """One file's size: 0 for 3 % of the files, else a log-normal of
    median 2.5 KiB (sigma 1.1: about 85 % under 8 KiB), at most 64 KiB."""
    if rng.random() < 0.03:
        return 0
    return min(MAX_SIZE, max(1, int(rng.lognormvariate(math.log(2560), 1.1))))


def make_tree(top, nfiles, seed):
    """Make the tree (module doc, "tree"); returns its counts."""
    rng = random.Random("rpfs-workload-%d" % seed)
    ndirs = max(1, nfiles // 25)
    os.mkdir(top)
    dirs = [("", 0)]  # (relative path, depth); "" is TOP
    for i in range(ndirs):
        cand = [d for d in dirs if d[1] < MAX_DEPTH]
        parent, depth = cand[rng.randrange(len(cand))]
        name = "%s%d" % (rng.choice(WORDS), i)
        rel = os.path.join(parent, name) if parent else name
        os.mkdir(os.path.join(top, rel))
        dirs.append((rel, depth + 1))
    pool = text_pool(rng, 1 << 20)
    exts = [e for e, w in EXTS for _ in range(w)]
    total = 0
    for i in range(nfiles):
        d = dirs[rng.randrange(len(dirs))][0]
        name = "%s_%s%d%s" % (rng.choice(WORDS), rng.choice(WORDS), i, rng.choice(exts))
        size = file_size(rng)
        off = rng.randrange(len(pool) - size) if size else 0
        path = os.path.join(top, d, name)
        with open(path, "wb") as f:
            f.write(pool[off:off + size])
        os.chmod(path, 0o755 if rng.random() < 0.03 else 0o644)
        os.utime(path, (MTIME0 + i, MTIME0 + i))
        total += size
    # directories last, deepest first: writing a file changes its
    # directory's mtime
    for rel, _ in sorted(dirs, key=lambda d: -d[1]):
        os.utime(os.path.join(top, rel), (MTIME0, MTIME0))
    return {"files": nfiles, "dirs": ndirs, "bytes": total, "entries": nfiles + ndirs + 1}


def manifest_lines(top):
    """The manifest of the tree at TOP (module doc, "manifest")."""
    lines = []
    for root, dnames, fnames in os.walk(top):
        dnames.sort()
        for name in [None] + sorted(dnames) + sorted(fnames):
            path = root if name is None else os.path.join(root, name)
            if name is None and root != top:
                continue  # a directory is listed by its parent
            rel = os.path.relpath(path, top)
            st = os.lstat(path)
            if os.path.isdir(path) and not os.path.islink(path):
                lines.append("%s d %o - - -" % (rel, st.st_mode & 0o7777))
            elif os.path.islink(path):
                lines.append("%s l %o %d - %s" % (rel, st.st_mode & 0o7777, st.st_size,
                                                  os.readlink(path)))
            else:
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for b in iter(lambda: f.read(1 << 20), b""):
                        h.update(b)
                lines.append("%s f %o %d %d %s" % (rel, st.st_mode & 0o7777, st.st_size,
                                                   int(st.st_mtime), h.hexdigest()))
    return sorted(lines)


def pairs_into(rec, pairs):
    """KEY=VALUE words into REC (numbers as numbers)."""
    for p in pairs:
        k, _, v = p.partition("=")
        try:
            rec[k] = int(v)
        except ValueError:
            rec[k] = v
    return rec


def record(prefix, phase, entries, seconds, pairs):
    """One timed job's record line (module doc, "record")."""
    rec = {"job": phase, "seconds": round(float(seconds), 3), "entries": int(entries)}
    d = mdmatrix.phase_delta(prefix, phase, int(entries))
    if d:
        rec["mgr"] = d
    print(json.dumps(pairs_into(rec, pairs)))


def mdrecords(mdjson, prefix, suffix, pairs):
    """The create, stat and unlink records of one bench-md run."""
    with open(mdjson) as f:
        md = json.loads(f.read().strip().splitlines()[-1])
    for ph in ("create", "stat", "unlink"):
        rec = {"job": "%s-%s" % (ph, suffix), "seconds": round(md["files"] / md[ph], 3),
               "entries": md["files"], "rate": md[ph]}
        d = mdmatrix.phase_delta(prefix, ph, md["files"])
        if d:
            rec["mgr"] = d
        print(json.dumps(pairs_into(rec, pairs)))


def table(path, outmd, notes):
    """Print and write the workload table (module doc, "table")."""
    recs = mdmatrix.load(path)
    targets = []
    for r in recs:
        if r["target"] not in targets:
            targets.append(r["target"])
    rounds = sorted({r["round"] for r in recs})
    jobs = [j for j in JOBS if any(r["job"] == j for r in recs)]
    by = {(r["job"], r["target"], r["round"]): r for r in recs}
    rpfs = [t for t in targets if t.startswith("rpfs")]
    head = ["job", "entries"]
    for t in targets:
        head.append(t)
        if t in rpfs:
            head += ["%s req/e" % t, "%s cmt/e" % t, "%s/pt" % t]
    rows = []
    for job in jobs:
        ok = {t: [by[(job, t, k)] for k in rounds
                  if (job, t, k) in by and "error" not in by[(job, t, k)]] for t in targets}
        ents = sorted({r["entries"] for t in targets for r in ok[t]})
        row = [JOB_TITLE.get(job, job), "/".join(str(e) for e in ents) or "-"]
        for t in targets:
            got = ok[t]
            if not got:
                row.append("failed" if any((job, t, k) in by for k in rounds) else "-")
            else:
                row.append(report.median_cell([r["seconds"] for r in got], len(rounds)) + " s")
            if t not in rpfs:
                continue
            m = [r["mgr"] for r in got if "mgr" in r]
            row.append("%.2f" % statistics.median(x["req_per_op"] for x in m) if m else "-")
            c = [x["commits_per_op"] for x in m if "commits_per_op" in x]
            row.append("%.3f" % statistics.median(c) if c else "-")
            q = [by[(job, t, k)]["seconds"] / by[(job, "passthrough", k)]["seconds"]
                 for k in rounds
                 if (job, t, k) in by and "error" not in by[(job, t, k)] and
                 (job, "passthrough", k) in by and "error" not in by[(job, "passthrough", k)] and
                 by[(job, "passthrough", k)]["seconds"] > 0]
            row.append(report.median_cell(q, len(rounds), "ratio") if q else "-")
        rows.append(row)
    legend = ("median time of %d round(s) per job and target (±: half the range of the "
              "rounds in %% of the median); req/e = the mgr's requests per file-system "
              "entry (rpfs_server_requests_total), cmt/e = its store commits per entry, "
              "both read before and after each job; T/pt = T's time / the passthrough's "
              "(median of the per-round ratios)" % len(rounds))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    print("Workload: " + legend)
    for n in notes:
        print("  " + n)
    print("\n".join([fmt % tuple(head)] + [fmt % tuple(r) for r in rows]))
    bad = [r for r in recs if "error" in r]
    for r in bad:
        print("failed: %s on %s, round %s: %s" % (r["job"], r["target"], r["round"], r["error"]))
    with open(outmd, "w") as f:
        f.write("# Small-file workload\n\n%s.\n\n" % legend)
        for n in notes:
            f.write("- %s\n" % n)
        f.write("\n| %s |\n|%s|\n" % (" | ".join(head), "|".join("---" for _ in head)))
        for r in rows:
            f.write("| %s |\n" % " | ".join(r))
        for r in bad:
            f.write("\nfailed: %s on %s, round %s: %s\n" % (r["job"], r["target"], r["round"],
                                                          r["error"]))


def main(argv):
    if len(argv) == 5 and argv[1] == "tree":
        print(json.dumps(make_tree(argv[2], int(argv[3]), int(argv[4]))))
    elif len(argv) == 4 and argv[1] == "manifest":
        lines = manifest_lines(argv[2])
        with open(argv[3], "w") as f:
            f.write("".join(l + "\n" for l in lines))
    elif len(argv) >= 6 and argv[1] == "record":
        record(argv[2], argv[3], argv[4], argv[5], argv[6:])
    elif len(argv) >= 5 and argv[1] == "mdrecords":
        mdrecords(argv[2], argv[3], argv[4], argv[5:])
    elif len(argv) >= 4 and argv[1] == "table":
        table(argv[2], argv[3], argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
