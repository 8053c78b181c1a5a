#!/usr/bin/env bash
# Installs the Debian packages the build needs, only those missing (safe to re-run).
set -euo pipefail
packages=(cmake ninja-build ccache g++ pkg-config libabsl-dev libgtest-dev libgmock-dev
  libbenchmark-dev nlohmann-json3-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libucx-dev ucx-utils python3 python3-venv
  libboost-dev librocksdb-dev
  libjpeg62-turbo-dev libpng-dev libwebp-dev libgif-dev zlib1g-dev  # common/image codecs
  libcurl4-openssl-dev  # common/image: the image URL fetcher
  clang libclang-rt-14-dev)  # tests/fuzz: clang's libFuzzer and sanitizer runtimes
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}"
fi
