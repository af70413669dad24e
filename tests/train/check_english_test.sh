#!/bin/sh
# docs/reference-model/check_english.py on the committed reference model: a prompt it loops on
# (a newline, then spaces) fails at --max-run 4 (exit 1) and passes when runs up to 48 are
# allowed (exit 0); a prompts file without prompts is bad input (exit 2).
#   check_english_test.sh CACT_RUN SOURCE_DIR
set -u
run=$1 src=$2
check="/usr/bin/python3 $src/docs/reference-model/check_english.py"
model=$src/docs/reference-model/reference.cact
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
echo "The above copyright notice and this permission notice shall be" > "$dir/loop.txt"
: > "$dir/empty.txt"
fail=0
$check "$run" "$model" "$dir/loop.txt" -n 16 > "$dir/out" 2>&1
rc=$?; [ $rc -eq 1 ] || { echo "FAIL: a looping continuation gave exit $rc"; cat "$dir/out"; fail=1; }
grep -q "1 of 1 prompts repeat" "$dir/out" || { echo "FAIL: no summary line"; cat "$dir/out"; fail=1; }
$check "$run" "$model" "$dir/loop.txt" -n 16 --max-run 48 > "$dir/out" 2>&1
rc=$?; [ $rc -eq 0 ] || { echo "FAIL: exit $rc with --max-run 48"; cat "$dir/out"; fail=1; }
$check "$run" "$model" "$dir/empty.txt" > "$dir/out" 2>&1
rc=$?; [ $rc -eq 2 ] || { echo "FAIL: an empty prompts file gave exit $rc"; fail=1; }
grep -q "empty.txt: no prompts" "$dir/out" || { echo "FAIL: the error does not name the file"; fail=1; }
[ $fail -eq 0 ] && echo "check_english: ok"
exit $fail
