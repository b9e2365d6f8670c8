#!/bin/sh
# readme-options.sh - the README's tables of options, one per program, are
# what the programs print with --help-markdown (from their option tables).
#   scripts/readme-options.sh README.md BIN...           check: exit 1 and
#                                                         the diff if any
#                                                         table differs
#   scripts/readme-options.sh --update README.md BIN...  rewrite the tables
# Each table stands in README.md between the lines
#   <!-- BEGIN NAME --help-markdown -->  and  <!-- END NAME -->
# NAME being the binary's file name (rpfs-mgr, rpfs-iod, rpfs-fuse).
set -eu
update=0
if [ "${1:-}" = --update ]; then
	update=1
	shift
fi
[ $# -ge 2 ] || { echo "usage: $0 [--update] README BIN..." >&2; exit 2; }
readme=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
cp "$readme" "$tmp/new"
for bin in "$@"; do
	name=$(basename "$bin")
	begin="<!-- BEGIN $name --help-markdown -->"
	end="<!-- END $name -->"
	if ! grep -qxF "$begin" "$readme" || ! grep -qxF "$end" "$readme"; then
		echo "$readme: no \"$begin\" ... \"$end\" block" >&2
		exit 1
	fi
	"$bin" --help-markdown > "$tmp/$name.md"
	awk -v b="$begin" -v e="$end" -v f="$tmp/$name.md" '
		$0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$tmp/new" > "$tmp/next"
	mv "$tmp/next" "$tmp/new"
done
if [ $update -eq 1 ]; then
	cat "$tmp/new" > "$readme"
	exit 0
fi
if ! diff -u "$readme" "$tmp/new"; then
	echo "$readme: a table of options differs from the program's" \
	     "--help-markdown (+ lines); run scripts/readme-options.sh --update" \
	     "$readme $*" >&2
	status=1
fi
exit $status
