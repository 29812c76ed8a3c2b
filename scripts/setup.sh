#!/usr/bin/env bash
# Installs what clover.cpp needs, from Debian packages and the npm registry (versions pinned by
# package-lock.json). Idempotent: safe to run again.
#   scripts/setup.sh          what building and running need: the compiler, CMake, the -dev
#                             libraries, the Vulkan headers and glslc, and Node.js + npm for the one
#                             npm package the web page bundles at build time (markdown-it)
#   scripts/setup.sh --test   that, plus the test tooling (scripts/test.sh runs this): GoogleTest,
#                             Google Benchmark, PyTorch and NumPy (the reference tests), clang (the
#                             fuzzers), the Vulkan validation layer and lavapipe (the Vulkan op tests
#                             without a GPU), chromium (the web page tests) and the npm test
#                             tooling (the llama.cpp oracle, the openai client, playwright-core...)
set -euo pipefail
cd "$(dirname "$0")/.."

TEST=0
for arg in "$@"; do
  case "$arg" in
    --test) TEST=1 ;;
    *) echo "setup: unknown option $arg (use --test for the test tooling)" >&2; exit 2 ;;
  esac
done

DEBIAN_PACKAGES=(
  cmake g++ make pkg-config git ccache
  libpcre2-dev libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  # Vulkan backend: headers and glslc to build it; the loader comes with libvulkan-dev.
  libvulkan-dev glslc
)
if ((TEST)); then
  DEBIAN_PACKAGES+=(
    libgtest-dev libgmock-dev libbenchmark-dev
    python3-numpy python3-torch libopenblas0-pthread python3-jinja2 python3-matplotlib
    clang libclang-rt-14-dev
    # lavapipe (Mesa's CPU Vulkan driver) and the Khronos validation layer, so the op tests run in
    # CI without a GPU; spirv-tools to inspect shaders.
    mesa-vulkan-drivers vulkan-validationlayers spirv-tools
    # the browser of the web page tests (tests/webui), driven by npm playwright-core, which
    # downloads no browser of its own.
    chromium
  )
fi
# Node.js and npm: any install will do, the Debian packages only when none is on the PATH.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  DEBIAN_PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages present"
fi

# package.json: markdown-it is the one dependency (the web page's), everything else is a
# devDependency (test tooling). Not `npm ci`: node-llama-cpp lists optional per-platform packages
# that the registry does not serve, which `npm ci` counts as a lock mismatch; `npm install` keeps
# the lock as it is.
if ((TEST)); then
  if [ ! -d node_modules/openai ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "setup: installing the npm test tooling (versions pinned by package-lock.json)"
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error
  else
    echo "setup: npm test tooling present"
  fi
elif [ ! -f node_modules/markdown-it/dist/browser/markdown-it.umd.min.js ]; then
  echo "setup: installing markdown-it for the web page (version pinned by package-lock.json)"
  npm install --omit=dev --no-audit --no-fund --loglevel=error
else
  echo "setup: markdown-it present"
fi
