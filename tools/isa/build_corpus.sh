#!/bin/sh
# Builds the ISA coverage corpus: every tests/fixtures/isa_corpus/*.cl compiled at -O2 with
# libclc for gfx1100 and gfx1030 (clang is deterministic, so the outputs are committed), plus
# LLVM's own disassembly of each object, which tests/sim_isa_corpus.rs and
# amdgpu-sim/src/isa/objdump_check.rs check the simulator's decoder against. Run from the
# repository root after changing a kernel or LLVM:
#
#     sh tools/isa/build_corpus.sh
set -eu
LLVM=${LLVM:-/usr/lib/llvm-22/bin}
LIBCLC=${LIBCLC:-/usr/lib/clc/amdgcn-amd-amdhsa.bc}
DIR=tests/fixtures/isa_corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for target in gfx1100 gfx1030; do
    mkdir -p "$DIR/$target"
    for source in "$DIR"/*.cl; do
        name=$(basename "$source" .cl)
        "$LLVM/clang" -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=$target -O2 -nogpulib \
            -cl-kernel-arg-info -mcode-object-version=4 -Xclang -mlink-builtin-bitcode -Xclang "$LIBCLC" \
            -c "$source" -o "$tmp/$name.o"
        "$LLVM/ld.lld" -shared "$tmp/$name.o" -o "$DIR/$target/$name.co"
        "$LLVM/llvm-objdump" -d --mcpu=$target "$DIR/$target/$name.co" > "$DIR/$target/$name.dis"
    done
done
