#!/usr/bin/env bash
# Installs everything clover.cpp needs to build and test, from Debian packages and the npm
# registry (test tooling only, pinned by package-lock.json). Idempotent: safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  cmake g++ make pkg-config git ccache
  libpcre2-dev libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy python3-torch libopenblas0-pthread python3-jinja2 python3-matplotlib
  clang libclang-rt-14-dev
  # Vulkan backend: headers and glslc to build; the loader, lavapipe (Mesa's CPU Vulkan driver) and
  # the Khronos validation layer so the op tests run in CI without a GPU; spirv-tools to inspect shaders.
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers spirv-tools
  chromium
)
# chromium: the browser of the web page tests (tests/webui), driven by npm playwright-core, which
# downloads no browser of its own.
# Node.js and npm run the test tooling (llama.cpp oracle, openai client); any install will do, the
# Debian packages only when none is on the PATH.
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

if [ -f package-lock.json ]; then
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "setup: installing npm test tooling (versions pinned by package-lock.json)"
    # Not `npm ci`: node-llama-cpp lists optional per-platform packages that the registry does not
    # serve, which `npm ci` counts as a lock mismatch; `npm install` keeps the lock as it is.
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error
  else
    echo "setup: npm test tooling present"
  fi
fi
