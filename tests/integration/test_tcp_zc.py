"""Reads answered by splice on TCP (fuse-client/cli_splice.c): the iods'
data goes from the sockets into pipes and on to /dev/fuse. Every read is
checked byte for byte against the data written; the transport counters
(user.rpfs.stats pipe_bytes) show that the spliced path served it (on
verbs nothing is spliced, and the same reads must still be right)."""
import hashlib
import json
import mmap
import os
import random
import threading

import util

MIB = 1 << 20


def _stats(mnt):
    return json.loads(os.getxattr(mnt.path, 'user.rpfs.stats'))


def _spliced(mnt, before):
    """Bytes put into pipes since the counters `before`."""
    return _stats(mnt)['pipe_bytes'] - before['pipe_bytes']


def _expect_spliced(mnt, before, at_least):
    got = _spliced(mnt, before)
    if _stats(mnt)['transport'] == 'tcp':
        assert got >= at_least, 'only %d bytes spliced, want >= %d' % (got, at_least)
    else:
        assert got == 0, '%d bytes spliced on %s' % (got, _stats(mnt)['transport'])


def _make(path, data, layout=None):
    """Create path (with layout, e.g. 'unit=4096,count=4') holding data."""
    if layout:
        with open(path, 'wb'):
            pass
        os.setxattr(path, 'user.rpfs.layout', layout.encode())
    with open(path, 'wb') as f:
        f.write(data)


def _dread(path, off, n):
    """pread n bytes at off with O_DIRECT (no page cache: every byte is a
    READ to rpfs-fuse) into a page-aligned buffer; returns what was read."""
    buf = mmap.mmap(-1, max(n, 1))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        got = os.preadv(fd, [memoryview(buf)[:n]], off)
        return bytes(buf[:got])
    finally:
        os.close(fd)
        buf.close()


def test_splice_1mib_reads_across_units(workdir, mnt):
    """1 MiB O_DIRECT reads of files striped over 4 iods at units of 64 KiB,
    4 KiB (257 pieces per read) and 1 MiB, and over 1 iod."""
    rng = random.Random(11)
    for layout in ('unit=65536,count=4', 'unit=4096,count=4', 'unit=1048576,count=4',
                   'unit=65536,count=1', None):
        f = os.path.join(workdir, 'big-%s' % (layout or 'default').replace(',', '-').replace('=', ''))
        data = rng.randbytes(6 * MIB + 4321)
        _make(f, data, layout)
        before = _stats(mnt)
        for off in range(0, len(data), MIB):
            want = data[off:off + MIB]
            assert _dread(f, off, MIB) == want, '%s at %d' % (layout, off)
        _expect_spliced(mnt, before, 6 * MIB)


def test_splice_unaligned_and_eof(workdir, mnt):
    """Unaligned offsets and lengths, pieces smaller than a page, reads
    crossing stripe units, short reads at EOF and past it."""
    rng = random.Random(12)
    f = os.path.join(workdir, 'odd')
    data = rng.randbytes(3 * MIB + 777)
    _make(f, data, 'unit=65536,count=4')
    before = _stats(mnt)
    for off, n in ((1, MIB - 3), (65535, 65538), (12345, 1000000), (4095, 200001),
                   (3 * MIB - 100000, MIB), (len(data) - 70000, MIB),
                   (len(data) - 1, 65536), (len(data), MIB), (len(data) + 5, MIB)):
        assert _dread(f, off, n) == data[off:off + n], 'off %d len %d' % (off, n)
    _expect_spliced(mnt, before, 2 * MIB)
    # through the page cache: readahead READs of up to 1 MiB
    with open(f, 'rb') as fh:
        assert fh.read() == data


def test_splice_holes(workdir, mnt):
    """Holes inside the file and a size extended past every object: the
    iods send zeros for what they do not have."""
    f = os.path.join(workdir, 'holes')
    with open(f, 'wb'):
        pass
    os.setxattr(f, 'user.rpfs.layout', b'unit=65536,count=4')
    a = os.urandom(100000)
    b = os.urandom(5000)
    with open(f, 'r+b') as fh:
        fh.write(a)
        fh.seek(2 * MIB + 3)
        fh.write(b)
        fh.truncate(5 * MIB)
    want = a + bytes(2 * MIB + 3 - len(a)) + b
    want += bytes(5 * MIB - len(want))
    before = _stats(mnt)
    for off in range(0, 5 * MIB, MIB):
        assert _dread(f, off, MIB) == want[off:off + MIB], 'at %d' % off
    assert _dread(f, 70000, MIB) == want[70000:70000 + MIB]
    _expect_spliced(mnt, before, 5 * MIB)


def test_splice_concurrent_readers(workdir, mnt):
    """Eight threads read different files and the same file at once, in
    random 1 MiB-ish O_DIRECT pieces: each worker thread of rpfs-fuse has
    its own pipes, and no reply may carry another read's bytes."""
    rng = random.Random(13)
    files = []
    for i in range(4):
        f = os.path.join(workdir, 'c%d' % i)
        data = rng.randbytes(8 * MIB + i * 1000)
        _make(f, data, 'unit=65536,count=4' if i % 2 else 'unit=16384,count=3')
        files.append((f, data))
    errors = []
    before = _stats(mnt)

    def reader(seed):
        r = random.Random(seed)
        try:
            for _ in range(40):
                f, data = files[r.randrange(len(files))]
                off = r.randrange(len(data))
                n = r.choice((MIB, MIB - 1, 300000, 65536))
                got = _dread(f, off, n)
                if got != data[off:off + n]:
                    errors.append('%s off %d len %d' % (f, off, n))
        except OSError as e:
            errors.append(repr(e))
    ts = [threading.Thread(target=reader, args=(s,)) for s in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, errors[:5]
    _expect_spliced(mnt, before, 8 * MIB)


def test_splice_dd(workdir, mnt, tmp_path):
    """A larger file read back by dd in 1 MiB O_DIRECT blocks, compared by
    sha256 with what was written."""
    f = os.path.join(workdir, 'dd')
    out = tmp_path / 'dd.out'
    data = random.Random(14).randbytes(32 * MIB + 1)
    _make(f, data)
    before = _stats(mnt)
    util.run(['dd', 'if=' + f, 'of=%s' % out, 'bs=1M', 'iflag=direct', 'status=none'])
    assert util.sha256_file(str(out)) == hashlib.sha256(data).hexdigest()
    _expect_spliced(mnt, before, 31 * MIB)
