"""Ordinary shell tools on the shared mount."""
import os
import stat

from util import run


def sh(cmd, cwd):
    return run(cmd, cwd=cwd).stdout


def test_cp_cat(workdir, tmp_path):
    src = tmp_path / 'src'
    src.write_bytes(os.urandom(300000))
    sh('cp %s f && cat f > %s/back' % (src, tmp_path), workdir)
    assert (tmp_path / 'back').read_bytes() == src.read_bytes()
    sh('echo hello > g && cat g g > h', workdir)
    assert sh('cat h', workdir) == 'hello\nhello\n'


def test_cp_recursive(workdir, tmp_path):
    t = tmp_path / 'tree'
    (t / 'a' / 'b').mkdir(parents=True)
    (t / 'a' / 'x').write_bytes(os.urandom(70000))
    (t / 'a' / 'b' / 'y').write_text('y\n')
    sh('cp -a %s copy && diff -r %s copy' % (t, t), workdir)


def test_dd(workdir, tmp_path):
    src = tmp_path / 'src'
    src.write_bytes(os.urandom(5 * 1024 * 1024 + 123))
    sh('dd if=%s of=d bs=64k status=none' % src, workdir)
    sh('dd if=d of=%s/back bs=1M status=none' % tmp_path, workdir)
    assert (tmp_path / 'back').read_bytes() == src.read_bytes()
    # dd into the middle without truncating
    sh('printf XYZ | dd of=d bs=1 seek=100000 conv=notrunc status=none', workdir)
    data = open(os.path.join(workdir, 'd'), 'rb').read()
    want = bytearray(src.read_bytes())
    want[100000:100003] = b'XYZ'
    assert data == bytes(want)


def test_ls_l(workdir):
    sh('echo abc > f; mkdir d; ln -s f s', workdir)
    out = sh('ls -l', workdir)
    lines = {l.split(' -> ')[0].split()[-1]: l for l in out.splitlines()[1:]}
    assert lines['f'].startswith('-rw') and ' 4 ' in lines['f']
    assert lines['d'].startswith('d')
    assert lines['s'].startswith('l') and lines['s'].endswith('s -> f')
    assert sh('ls -la', workdir).splitlines()[1].split()[-1] == '.'


def test_mv(workdir):
    sh('echo one > a; mkdir d; mv a b; mv b d/c; echo two > e; mv -f e d/c', workdir)
    assert not os.path.exists(os.path.join(workdir, 'a'))
    assert not os.path.exists(os.path.join(workdir, 'b'))
    assert sh('cat d/c', workdir) == 'two\n'
    sh('mv d d2', workdir)
    assert sh('cat d2/c', workdir) == 'two\n'


def test_mkdir_p_rm_r(workdir):
    sh('mkdir -p a/b/c/d/e && touch a/b/c/d/e/f a/b/x && ln -s x a/b/l', workdir)
    assert os.path.isfile(os.path.join(workdir, 'a/b/c/d/e/f'))
    sh('mkdir -p a/b/c', workdir)  # already there: fine
    sh('rm -r a', workdir)
    assert os.listdir(workdir) == []


def test_ln_hard_and_symbolic(workdir):
    sh('echo data > f; ln f h; ln -s f s; ln -s /nonexistent/x dangling', workdir)
    st = os.stat(os.path.join(workdir, 'f'))
    assert st.st_nlink == 2
    assert os.stat(os.path.join(workdir, 'h')).st_ino == st.st_ino
    assert sh('cat s', workdir) == 'data\n'
    assert sh('readlink s', workdir) == 'f\n'
    assert sh('readlink dangling', workdir) == '/nonexistent/x\n'
    assert run('cat dangling', cwd=workdir, check=False).returncode != 0


def test_chmod(workdir):
    sh('touch f && chmod 640 f', workdir)
    assert stat.S_IMODE(os.stat(os.path.join(workdir, 'f')).st_mode) == 0o640
    sh('chmod u+x,g-r,o+w f', workdir)
    assert stat.S_IMODE(os.stat(os.path.join(workdir, 'f')).st_mode) == 0o702
    sh('mkdir d && chmod 1777 d', workdir)
    assert stat.S_IMODE(os.stat(os.path.join(workdir, 'd')).st_mode) == 0o1777


def test_chown(workdir):
    sh('touch f && chown 1234:5678 f', workdir)
    assert sh('stat -c %u:%g f', workdir) == '1234:5678\n'
    sh('chown :99 f', workdir)
    assert sh('stat -c %u:%g f', workdir) == '1234:99\n'


def test_touch_d(workdir):
    sh('TZ=UTC touch -d "2001-02-03 04:05:06.5" f', workdir)
    st = os.stat(os.path.join(workdir, 'f'))
    assert st.st_mtime_ns == 981173106500000000
    assert st.st_atime_ns == 981173106500000000
    sh('TZ=UTC touch -m -d "2010-01-01 00:00:00" f', workdir)
    st = os.stat(os.path.join(workdir, 'f'))
    assert st.st_mtime == 1262304000
    assert st.st_atime_ns == 981173106500000000


def test_truncate(workdir):
    sh('printf 0123456789 > f && truncate -s 4 f', workdir)
    assert sh('cat f', workdir) == '0123'
    sh('truncate -s 1M f', workdir)
    data = open(os.path.join(workdir, 'f'), 'rb').read()
    assert len(data) == 1 << 20 and data[:4] == b'0123' and data[4:] == bytes((1 << 20) - 4)
    sh('truncate -s 0 f', workdir)
    assert os.stat(os.path.join(workdir, 'f')).st_size == 0


def test_stat(workdir):
    sh('umask 022; printf abc > f', workdir)
    assert sh('stat -c "%s %F %h %a" f', workdir) == '3 regular file 1 644\n'
    st = os.stat(os.path.join(workdir, 'f'))
    assert sh('stat -c %i f', workdir).strip() == str(st.st_ino)
    assert sh('stat -c %F .', workdir).strip() == 'directory'


def test_df(mnt):
    out = run(['df', '-P', mnt.path]).stdout.splitlines()
    f = out[1].split()
    assert int(f[1]) > 0, out
    assert f[-1] == mnt.path
    out = run(['df', '-i', mnt.path]).stdout.splitlines()
    assert int(out[1].split()[1]) > 0, out
