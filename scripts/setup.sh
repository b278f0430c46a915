#!/usr/bin/env bash
# Installs what the build, the tests and the demo need, only when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
[ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || need_apt+=(mesa-vulkan-drivers)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown

# The threaded wasm build (scripts/build-wasm.sh) rebuilds std with atomics, which takes the
# nightly toolchain and its rust-src; both come from rustup's own server.
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal --component rust-src ||
    echo "setup.sh: WARNING: no nightly toolchain: pkg/ will have no threaded build" >&2
elif ! rustup component list --toolchain nightly --installed | grep -qx 'rust-src'; then
  rustup component add rust-src --toolchain nightly ||
    echo "setup.sh: WARNING: no rust-src for nightly: pkg/ will have no threaded build" >&2
fi

# wasm-bindgen-cli must match the wasm-bindgen crate in Cargo.lock exactly.
wb_version=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
if ! command -v wasm-bindgen >/dev/null || [ "$(wasm-bindgen --version | cut -d' ' -f2)" != "$wb_version" ]; then
  cargo install -q wasm-bindgen-cli --version "$wb_version"
fi

# The web stage's driver. `wasm-pack test` takes the wasm-bindgen-test-runner beside the first
# `wasm-bindgen` on PATH whose version is Cargo.lock's (installed above) and, with
# `--mode no-install`, fails rather than download one; chromedriver is /usr/bin/chromedriver.
command -v wasm-pack >/dev/null || cargo install -q wasm-pack --locked

# The demo's bundler and the browser tests' driver; playwright-core never downloads a browser.
if [ -f package-lock.json ] && { [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; }; then
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
