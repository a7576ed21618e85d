#!/bin/sh
# Link valgrind's own library files into the private tool directory, beside
# the Cohort tool, so that VALGRIND_LIB can point there.
set -e
src=$1 dst=$2
mkdir -p "$dst"
for f in "$src"/*; do
  name=$(basename "$f")
  case $name in cohort-*|vgpreload_cohort-*) continue ;; esac
  ln -sfn "$f" "$dst/$name"
done
