#!/usr/bin/env bash
# System tools the test suite needs beyond Python packages: Debian packages (a browser, a database
# server, nginx for the multi-replica deployment test, PDF text extraction, a Chinese font for worksheets), the KaTeX npm package used to check every LaTeX string, and axe-core for the accessibility test.
# Idempotent: installs only what is missing. Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
ls /usr/share/fonts/truetype/wqy/wqy-microhei.ttc >/dev/null 2>&1 || need+=(fonts-wqy-microhei)  # Chinese PDFs
ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 || need+=(fonts-dejavu-core)  # the paper corpus's printed answers
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)  # tests/test_deploy.py
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if [ -f tests/katex/package.json ]; then
  (cd tests/katex && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ -f tests/a11y/package.json ]; then  # axe-core, injected into every page by tests/e2e/test_a11y.py
  (cd tests/a11y && npm ci --no-audit --no-fund --loglevel=error)
fi
